"""Deterministic benchmark graphs in the reference server's JSONL format.

``make_graph(n)`` builds ``n`` entities with 5 observations each and ``n`` relations, with
realistic unicode text: names with accents, CJK names, emoji in observations. The same ``n``
always gives the same bytes (seeded), so runs on different days compare.

Search targets are planted at known frequencies so the three search figures mean the same thing
at every size:

* ``RARE_TERM`` appears in exactly one entity (a 1-hit search, a point operation);
* ``COMMON_TERM`` appears in 1 % of the entities (the result grows with the graph);
* ``TWO_WORDS`` (a phrase of two words, searched as one substring, the reference server's only
  mode) appears in 0.1 % of the entities;
* ``BROAD_TERM`` appears in 2.5 % of the entities (a broad search: the reply, with neighbours, is
  the kind that grows past what a client reads quickly). Its text takes no random draw, so every
  other byte of the graph is as before it was planted.

The random vocabulary below never contains those strings, so the counts are exact.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

RARE_TERM = "theremin"
COMMON_TERM = "Kraków"
TWO_WORDS = "green tea"
COMMON_EVERY = 100      # 1 % of the entities
TWO_WORDS_EVERY = 1000  # 0.1 %
BROAD_TERM = "Vilnius"
BROAD_EVERY = 40        # 2.5 %
BROAD_AT = 20           # i % BROAD_EVERY == BROAD_AT
OBSERVATIONS_PER_ENTITY = 5

FIRST = ["Zoë", "José", "François", "Åsa", "Björn", "Chloé", "Dvořák", "Émile", "Søren", "Łucja",
         "Ñuño", "Renée", "Jürgen", "Ines", "Mateus", "Aiyana", "Kwame", "Priya", "Olúwaseun", "Niamh",
         "Yusuf", "Saoirse", "Thảo", "Mehmet", "Ayşe", "Gökhan", "Małgorzata", "Ørjan", "Ľubica", "Inés"]
LAST = ["Müller", "García", "Øvergaard", "Nuñez", "Kowalczyk", "Lefèvre", "Ångström", "Dąbrowski",
        "O'Brien", "Nguyễn", "Çelik", "Schröder", "Jiménez", "Papadopoulos", "Håkansson", "Novák",
        "Rossi", "Fernández", "Öztürk", "Żukowski", "Szabó", "Ibáñez", "Mäkinen", "Ólafsson"]
CJK = ["王小明", "李娜", "張偉", "田中太郎", "佐藤花子", "김민준", "이서연", "陳美玲", "鈴木一郎", "박지훈",
       "劉洋", "山本さくら", "黃志強", "최유진", "中村悠真", "林雅婷"]
TYPES = ["person", "organization", "project", "city", "event", "book", "café", "tool", "会议", "product"]
CITIES = ["Zürich", "São Paulo", "Reykjavík", "Москва", "東京", "서울", "Montréal", "Málaga", "Bogotá",
          "Thessaloníki", "İstanbul", "Łódź", "Göteborg", "Ciudad de México", "Nuuk", "Dakar", "Lyon"]
ACTIVITIES = ["plays the cello", "runs marathons", "collects stamps", "writes poetry", "bakes sourdough",
              "climbs mountains", "restores bicycles", "speaks four languages", "keeps bees",
              "paints watercolours", "studies astronomy", "brews kombucha", "sails dinghies",
              "grows bonsai", "learns Go", "repairs watches", "teaches yoga", "knits sweaters"]
ROLES = ["engineer", "designer", "product manager", "researcher", "nurse", "teacher", "architect",
         "chef", "data scientist", "lawyer", "journalist", "pilot", "translator", "photographer"]
FOODS = ["ramen", "pierogi", "paella", "croissants", "dim sum", "falafel", "bibimbap", "pho",
         "crème brûlée", "tiramisù", "phở bò", "köttbullar", "smørrebrød", "bánh mì"]
EMOJI = ["🎻", "🏔️", "☕", "🚲", "📚", "🌱", "🧗", "🍜", "✈️", "🐝", "🎨", "🔭", "⛵", "🧶", "🎉", "👩‍💻"]
MONTHS = ["January", "February", "März", "avril", "mayo", "June", "juillet", "August", "septiembre",
          "October", "novembre", "December"]
RELATION_TYPES = ["works_at", "knows", "manages", "lives_in", "member_of", "mentors", "reports_to",
                  "collaborates_with", "founded", "attended"]


@dataclass
class Graph:
    """A generated graph: entities ``(name, type, observations)`` and relations ``(from, to, type)``."""

    entities: list[tuple[str, str, list[str]]] = field(default_factory=list)
    relations: list[tuple[str, str, str]] = field(default_factory=list)

    def write_jsonl(self, path: Path) -> int:
        """Write the graph as the reference server's JSONL (entities then relations); returns bytes."""
        dumps = json.dumps
        lines = [dumps({"type": "entity", "name": n, "entityType": t, "observations": o},
                       ensure_ascii=False, separators=(",", ":")) for n, t, o in self.entities]
        lines += [dumps({"type": "relation", "from": a, "to": b, "relationType": r},
                        ensure_ascii=False, separators=(",", ":")) for a, b, r in self.relations]
        data = ("\n".join(lines)).encode("utf-8")
        path.write_bytes(data)
        return len(data)


def entity_name(rng: random.Random, i: int) -> str:
    """A unique, realistic name: accented Latin or CJK, suffixed by ``#i`` to stay unique."""
    if i % 7 == 3:
        return f"{rng.choice(CJK)} #{i}"
    return f"{rng.choice(FIRST)} {rng.choice(LAST)} #{i}"


def observation(rng: random.Random, name: str, k: int) -> str:
    """One atomic fact in one of several shapes (mixed scripts, some emoji)."""
    first = name.split(" ")[0]
    shape = k % 5
    if shape == 0:
        return f"{first} is a {rng.choice(ROLES)} based in {rng.choice(CITIES)}"
    if shape == 1:
        return f"{rng.choice(ACTIVITIES).capitalize()} on weekends {rng.choice(EMOJI)}"
    if shape == 2:
        return f"Favourite food: {rng.choice(FOODS)}; dislikes {rng.choice(FOODS)}"
    if shape == 3:
        return f"Met at a conference in {rng.choice(CITIES)} in {rng.choice(MONTHS)} {rng.randint(1998, 2026)}"
    return f"Prefers {rng.choice(['email', 'phone calls', 'Signal', 'メール', '전화', 'Slack'])} " \
           f"and {rng.choice(['mornings', 'late evenings', 'quiet cafés', 'long walks'])} {rng.choice(EMOJI)}"


def make_graph(n: int, seed: int = 20261130) -> Graph:
    """``n`` entities (5 observations each) and ``n`` relations between random distinct entities,
    with the search targets planted (see the module docstring)."""
    rng = random.Random(seed + n)
    graph = Graph()
    names = [entity_name(rng, i) for i in range(n)]
    for i, name in enumerate(names):
        obs = [observation(rng, name, k) for k in range(OBSERVATIONS_PER_ENTITY)]
        if i % COMMON_EVERY == 50:
            obs[3] = f"Moved to {COMMON_TERM} in {rng.choice(MONTHS)} {rng.randint(2000, 2026)} 🏙️"
        if i % TWO_WORDS_EVERY == 500:
            obs[2] = f"Drinks {TWO_WORDS} every afternoon 🍵"
        if i % BROAD_EVERY == BROAD_AT:
            obs[1] = f"Spent a summer in {BROAD_TERM} 🌳"
        if i == n // 2:
            obs[4] = f"Secretly practises the {RARE_TERM} at night 🎶"
        graph.entities.append((name, TYPES[i % len(TYPES)], obs))
    seen: set[tuple[str, str, str]] = set()
    while len(graph.relations) < n and n > 1:
        a, b = rng.randrange(n), rng.randrange(n)
        if a == b:
            continue
        rel = (names[a], names[b], rng.choice(RELATION_TYPES))
        if rel not in seen:
            seen.add(rel)
            graph.relations.append(rel)
    return graph


def expected_hits(n: int) -> dict[str, int]:
    """How many entities each planted search target matches in ``make_graph(n)``."""
    return {
        "rare": 1 if n else 0,
        "common": sum(1 for i in range(n) if i % COMMON_EVERY == 50),
        "two_words": sum(1 for i in range(n) if i % TWO_WORDS_EVERY == 500),
        "broad": sum(1 for i in range(n) if i % BROAD_EVERY == BROAD_AT),
    }
