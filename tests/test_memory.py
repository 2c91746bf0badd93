"""helpers.memory (the end-to-end memory network) and helpers.tasks.memory_qa (the stories)."""

import pytest
import torch
from torch.nn import functional as F

from helpers.memory import MemoryNetwork
from helpers.tasks.memory_qa import (
    PLACES,
    WORDS,
    accuracy,
    decode,
    qa_stories,
    train_memory_network,
)


def reference(model, story, question):
    """Sukhbaatar et al.'s equations written out with nn.Embedding lookups and a plain
    softmax (no slot mask: the stories here have no empty slot)."""
    tables = [embedding.weight for embedding in model.embeddings]
    u = F.embedding(question, tables[0]).sum(-2)  # (B, D), B = A^1
    weights = []
    for k in range(model.hops):
        m = F.embedding(story, tables[k]).sum(-2)  # (B, M, D), A^k
        c = F.embedding(story, tables[k + 1]).sum(-2)  # (B, M, D), C^k = A^{k+1}
        p = torch.softmax(torch.einsum("bmd,bd->bm", m, u), dim=-1)
        u = u + torch.einsum("bm,bmd->bd", p, c)
        weights.append(p)
    return u @ tables[-1].T, torch.stack(weights, 1)


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_forward_equals_the_equations(hops):
    torch.manual_seed(0)
    model = MemoryNetwork(11, 6, hops).double()
    story = torch.randint(1, 11, (4, 5, 3))
    question = torch.randint(1, 11, (4, 2))
    logits, weights = model(story, question)
    want_logits, want_weights = reference(model, story, question)
    torch.testing.assert_close(logits, want_logits)
    torch.testing.assert_close(weights, want_weights)
    assert logits.shape == (4, 11) and weights.shape == (4, hops, 5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, hops, dtype=torch.float64))


def test_adjacent_tying_holds_hops_plus_one_tables():
    model = MemoryNetwork(9, 4, 3)
    assert len(model.embeddings) == 4
    assert sum(p.numel() for p in model.parameters()) == 4 * 9 * 4
    assert all(torch.equal(e.weight[0], torch.zeros(4)) for e in model.embeddings)


def test_padding_words_and_empty_slots_are_ignored():
    torch.manual_seed(0)
    model = MemoryNetwork(8, 5, 2).double()
    story = torch.randint(1, 8, (2, 3, 3))
    question = torch.randint(1, 8, (2, 2))
    padded_story = torch.cat([story, torch.zeros(2, 3, 2, dtype=torch.long)], -1)  # pad words
    padded_story = torch.cat([padded_story, torch.zeros(2, 2, 5, dtype=torch.long)], 1)  # slots
    padded_question = torch.cat([question, torch.zeros(2, 1, dtype=torch.long)], -1)
    logits, weights = model(story, question)
    logits_p, weights_p = model(padded_story, padded_question)
    torch.testing.assert_close(logits_p, logits)
    torch.testing.assert_close(weights_p[..., :3], weights)
    assert torch.equal(weights_p[..., 3:], torch.zeros(2, 2, 2, dtype=torch.float64))


def test_empty_memory_gives_zero_weights_and_the_question_alone():
    model = MemoryNetwork(6, 3, 2).double()
    question = torch.tensor([[1, 2]])
    logits, weights = model(torch.zeros(1, 2, 3, dtype=torch.long), question)
    assert torch.equal(weights, torch.zeros(1, 2, 2, dtype=torch.float64))
    u = model.embeddings[0].weight[question].sum(-2)
    torch.testing.assert_close(logits, u @ model.embeddings[-1].weight.T)


def test_stories_answer_by_their_facts():
    generator = torch.Generator().manual_seed(0)
    for facts in (1, 2):
        story, question, answer = qa_stories(50, facts, generator)
        assert story.shape == (50, 6, 3) and question.shape == (50, 2) and answer.shape == (50,)
        for b in range(50):
            sentences = [decode(s).split() for s in story[b]]
            place = {s[0]: s[2] for s in sentences if s[1] == "in"}
            holder = {s[2]: s[0] for s in sentences if s[1] == "has"}
            asked = WORDS[question[b, 1]]
            want = place[asked] if facts == 1 else place[holder[asked]]
            assert WORDS[answer[b]] == want and want in PLACES


def test_two_hops_learn_the_two_fact_task_and_one_hop_does_not():
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    train, test = qa_stories(600, 2, generator), qa_stories(300, 2, generator)
    scores = {}
    for hops in (1, 2):
        torch.manual_seed(0)
        model = MemoryNetwork(len(WORDS), 20, hops)
        losses = train_memory_network(model, train, 100, 0.02, 64, torch.Generator().manual_seed(0))
        assert len(losses) == 100
        scores[hops] = accuracy(model, test)
    assert scores[2] > 0.95 and scores[1] < 0.45, scores


def test_task_inputs_are_checked():
    with pytest.raises(ValueError, match="supporting_facts"):
        qa_stories(3, 3)
    with pytest.raises(ValueError, match="num_people"):
        qa_stories(3, 1, num_people=7)
    with pytest.raises(ValueError, match="model"):
        accuracy("model", qa_stories(2, 1))
