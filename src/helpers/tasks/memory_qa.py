"""The memory-network chapter's task: "where is X?" stories, generated in code, and training.

A story is a handful of facts in random order, each a sentence of three words:
``mary in kitchen`` (a person's place) and ``mary has apple`` (who holds an object). Every
person of a story is in a different place, and every object is held by one of them. A
question is two words, ``where mary`` or ``where apple``; the answer is a place:

- one supporting fact: ``where <person>``, answered by that person's sentence;
- two supporting facts: ``where <object>``, answered by chaining two sentences: who has
  the object, then where that person is (like task 2 of bAbI, Weston et al., 2016).

The facts describe the present, so their order does not matter (no "then moved to").
Token 0 is padding. Shapes: B stories, M = people + objects memory slots, L = 3 words a
sentence, question (B, 2), answer (B,).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from helpers.checks import check_generator, check_instance, check_int, check_real, require
from helpers.memory import MemoryNetwork

__all__ = [
    "WORDS",
    "PEOPLE",
    "PLACES",
    "OBJECTS",
    "qa_stories",
    "train_memory_network",
    "accuracy",
    "decode",
]

PEOPLE = ["mary", "john", "sandra", "daniel", "fred", "bill"]
PLACES = ["kitchen", "garden", "office", "hallway", "bedroom", "bathroom"]
OBJECTS = ["apple", "ball", "milk", "book"]
WORDS = ["<pad>", "where", "in", "has", *PEOPLE, *PLACES, *OBJECTS]  # id = position
_ID = {word: i for i, word in enumerate(WORDS)}


def qa_stories(
    num_stories: int,
    supporting_facts: int,
    generator: torch.Generator | None = None,
    num_people: int = 4,
    num_objects: int = 2,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``num_stories`` random stories with a question needing 1 or 2 supporting facts.

    Returns ``(story (B, M, 3), question (B, 2), answer (B,))`` of token ids (see
    :data:`WORDS`), M = num_people + num_objects sentences in random order, on the CPU,
    drawn from ``generator``, a CPU ``torch.Generator`` (or None, torch's global one).
    """
    num_stories = check_int(num_stories, "num_stories", 1)
    require(
        supporting_facts in (1, 2), f"supporting_facts must be 1 or 2, got {supporting_facts!r}"
    )
    check_generator(generator)
    num_people = check_int(num_people, "num_people", 1)
    num_objects = check_int(num_objects, "num_objects", 1)
    require(
        num_people <= len(PEOPLE) and num_people <= len(PLACES),
        f"num_people must be at most {min(len(PEOPLE), len(PLACES))}, got {num_people}",
    )
    require(
        num_objects <= len(OBJECTS),
        f"num_objects must be at most {len(OBJECTS)}, got {num_objects}",
    )
    stories, questions, answers = [], [], []
    for _ in range(num_stories):
        people = torch.randperm(len(PEOPLE), generator=generator)[:num_people].tolist()
        places = torch.randperm(len(PLACES), generator=generator)[:num_people].tolist()
        objects = torch.randperm(len(OBJECTS), generator=generator)[:num_objects].tolist()
        holders = torch.randint(0, num_people, (num_objects,), generator=generator).tolist()
        facts = [[_ID[PEOPLE[p]], _ID["in"], _ID[PLACES[q]]] for p, q in zip(people, places)]
        facts += [
            [_ID[PEOPLE[people[h]]], _ID["has"], _ID[OBJECTS[o]]] for o, h in zip(objects, holders)
        ]
        order = torch.randperm(len(facts), generator=generator).tolist()
        stories.append([facts[i] for i in order])
        if supporting_facts == 1:
            asked = int(torch.randint(0, num_people, (1,), generator=generator))
            questions.append([_ID["where"], _ID[PEOPLE[people[asked]]]])
            answers.append(_ID[PLACES[places[asked]]])
        else:
            asked = int(torch.randint(0, num_objects, (1,), generator=generator))
            questions.append([_ID["where"], _ID[OBJECTS[objects[asked]]]])
            answers.append(_ID[PLACES[places[holders[asked]]]])
    return torch.tensor(stories), torch.tensor(questions), torch.tensor(answers)


def decode(tokens) -> str:
    """Token ids (…) as words, padding left out: ``decode(story[0, 2])`` → ``"mary in kitchen"``."""
    return " ".join(WORDS[i] for i in torch.as_tensor(tokens).reshape(-1).tolist() if i != 0)


def train_memory_network(
    model: MemoryNetwork,
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    steps: int = 300,
    lr: float = 0.02,
    batch_size: int = 128,
    generator: torch.Generator | None = None,
) -> list[float]:
    """Train ``model`` with Adam on ``data = (story, question, answer)`` for ``steps`` steps
    of ``batch_size`` stories drawn from ``generator``, with cross-entropy on the answer.
    The rows are drawn on the CPU (``generator`` a CPU ``torch.Generator``, on any device)
    and the batches moved to the model's device. Returns the training loss of each step."""
    check_instance(model, MemoryNetwork, "model")
    steps = check_int(steps, "steps", 1)
    lr = check_real(lr, "lr", minimum=0.0)
    batch_size = check_int(batch_size, "batch_size", 1)
    check_generator(generator)
    story, question, answer = data
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    device = model.embeddings[0].weight.device  # the batches go where the model is
    model.train()
    for _ in range(steps):
        rows = torch.randint(0, len(answer), (batch_size,), generator=generator)
        rows = rows.to(answer.device)
        batch = (story[rows].to(device), question[rows].to(device), answer[rows].to(device))
        logits, _ = model(batch[0], batch[1])  # (batch, V)
        loss = F.cross_entropy(logits, batch[2])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@torch.no_grad()
def accuracy(model: MemoryNetwork, data: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> float:
    """The share of ``data = (story, question, answer)`` that ``model`` answers right (the
    data are moved to the model's device)."""
    check_instance(model, MemoryNetwork, "model")
    device = model.embeddings[0].weight.device
    story, question, answer = (t.to(device) for t in data)
    model.eval()
    logits, _ = model(story, question)
    return (logits.argmax(-1) == answer).float().mean().item()
