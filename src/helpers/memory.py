"""Reading an external memory: the end-to-end memory network (Sukhbaatar et al., 2015).

A story of M sentences is written into a memory of M slots, each sentence a bag of words:
the memory vector m_i = Σ_j A x_ij and the output vector c_i = Σ_j C x_ij (embeddings A, C of
shape (V, D), summed over the sentence's words). The question is embedded as u = Σ_j B q_j.
One *hop* reads the memory with attention, the question as the query, the m_i as keys and
the c_i as values:

    p = softmax(uᵀ m_i)  over the M slots,    o = Σ_i p_i c_i,    u ← u + o,

and after K hops (Sukhbaatar et al.'s K, not the book's number of keys) the answer is
â = softmax(W u) over the vocabulary. With *adjacent* weight tying (their Section 2.2) hop
k+1 reads with A^{k+1} = C^k, the question uses B = A^1 and the answer W = C^K, so K
hops hold K + 1 embedding matrices.

Token id 0 is padding: it is dropped from every bag of words (its embedding rows never enter a
read; the answer table's row 0 still gets a logit, so training moves it), and a memory slot
whose words are all padding is masked (it gets weight 0). Shapes: B batch, M memory slots (sentences), L words
per sentence, V vocabulary, D embedding size; the number of hops is spelled out.
"""

from __future__ import annotations

import torch
from torch import nn

from helpers.attention import _masked_softmax
from helpers.checks import check_int, check_real, check_tensor, require

__all__ = ["MemoryNetwork"]


class MemoryNetwork(nn.Module):
    """An end-to-end memory network with ``hops`` hops and adjacent weight tying.

    Args:
        vocab: V, the vocabulary size (token 0 is padding).
        d: D, the embedding size.
        hops: the number of memory reads (Sukhbaatar et al.'s K).
        init_std: the standard deviation of the Gaussian start of every embedding
            (Sukhbaatar et al. use 0.1; 0.5 trains the book's short runs more reliably).

    ``embeddings`` is an ``nn.ModuleList`` of hops + 1 ``nn.Embedding(V, D, padding_idx=0)``:
    entry 0 is A^1 = B, entry k (1 ≤ k ≤ hops) is C^k = A^{k+1}, and the last one is Wᵀ.
    ``forward(story, question)`` with story (B, M, L) and question (B, L) of token ids
    returns ``(logits (B, V), weights (B, hops, M))``: the answer's scores and each hop's
    attention over the memory slots.
    """

    def __init__(self, vocab: int, d: int, hops: int = 1, init_std: float = 0.5):
        super().__init__()
        self.vocab = check_int(vocab, "vocab", 2)
        self.d = check_int(d, "d", 1)
        self.hops = check_int(hops, "hops", 1)
        init_std = check_real(init_std, "init_std", minimum=0.0)
        self.embeddings = nn.ModuleList(
            nn.Embedding(self.vocab, self.d, padding_idx=0) for _ in range(self.hops + 1)
        )
        for embedding in self.embeddings:  # a Gaussian start; the padding row starts at zero
            nn.init.normal_(embedding.weight, std=init_std)
            with torch.no_grad():
                embedding.weight[0].zero_()

    def forward(
        self, story: torch.Tensor, question: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        for tokens, name, shape in (
            (story, "story", "(B, M, L)"),
            (question, "question", "(B, L)"),
        ):
            check_tensor(tokens, name, shape, ndim=len(shape.split(",")))
            require(
                tokens.dtype in (torch.int64, torch.int32),
                f"{name} must be an integer tensor of token ids {shape}, got dtype {tokens.dtype}",
            )
            require(
                tokens.numel() == 0 or 0 <= int(tokens.min()) <= int(tokens.max()) < self.vocab,
                f"{name} must hold token ids in [0, vocab={self.vocab}) (0 is padding)",
            )
        require(
            question.shape[0] == story.shape[0],
            f"question must have story's batch size B={story.shape[0]}, got shape "
            f"{tuple(question.shape)}",
        )
        return self._forward(story, question)

    def _forward(self, story, question):
        """The unchecked core of :meth:`forward`."""
        slot_mask = (story != 0).any(dim=-1)  # (B, M): True = a slot that holds a sentence
        tables = [embedding.weight[1:] for embedding in self.embeddings]  # (V - 1, D), no pad
        dtype = tables[0].dtype
        # bags of words: word counts per sentence, padding dropped; Σ_j A x_ij = counts @ A
        story_bags = nn.functional.one_hot(story, self.vocab).sum(-2)[..., 1:].to(dtype)
        question_bag = nn.functional.one_hot(question, self.vocab).sum(-2)[..., 1:].to(dtype)
        u = question_bag @ tables[0]  # (B, D): u^1 = Σ_j B q_j, B = A^1
        weights = []
        for k in range(self.hops):
            memory = story_bags @ tables[k]  # (B, M, D): m_i = Σ_j A^k x_ij
            output = story_bags @ tables[k + 1]  # (B, M, D): c_i = Σ_j C^k x_ij
            scores = (memory @ u.unsqueeze(-1)).squeeze(-1)  # (B, M): uᵀ m_i
            p = _masked_softmax(scores, slot_mask)  # (B, M)
            o = (p.unsqueeze(-2) @ output).squeeze(-2)  # (B, D): o = Σ_i p_i c_i
            u = u + o  # u^{k+1} = u^k + o^k
            weights.append(p)
        logits = u @ self.embeddings[-1].weight.T  # (B, V): W u^{K+1}, W = C^K (V, d)
        return logits, torch.stack(weights, dim=1)  # (B, V), (B, hops, M)

    def extra_repr(self) -> str:
        return f"vocab={self.vocab}, d={self.d}, hops={self.hops}"
