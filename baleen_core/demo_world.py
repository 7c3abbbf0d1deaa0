"""A seeded generator of a fictional multi-hop world, written in HoVer's upstream formats.

Entities (countries, cities, universities, people, films, bands, companies) have attributes and
relations; each gets a Wikipedia-style intro of 2-5 sentences that refers back with pronouns. Claims
follow relation chains of 2, 3 or 4 passages: only the first entity is named, the bridge entities
are named only in the intermediate passages, so a retriever must hop. NOT_SUPPORTED claims swap the
final value for a wrong one of the same kind. Distractors are novels that share a film's title.

Output, same layout as hover-mini so the demo goes through the real readers::

    wiki/AA/wiki_NN.bz2      abstracts layout, the entity passages (gold candidates), pre-split
    beir_corpus.jsonl.gz     BEIR lines, the distractor novels, raw text (split by our splitter)
    claims_train.json        HoVer release JSON
    claims_dev.json
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import random
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from baleen_core.config import DemoConfig

_SYLLABLES = "ka lo ri ve na tor mi sel an dor ba qu el ith ro ma zen fi lu cas pel ven ory ul tha gre mon sa vi".split()
_GIVEN = "Ada Bram Cora Dane Elin Faro Gita Hale Ines Jory Kael Lina Miro Nadia Oren Pia Quill Rhea Soren Tova Ulric Vera Wren Yara Zane".split()
_GENRES = ["drama", "comedy", "thriller", "documentary", "science fiction", "musical", "western", "horror"]
_MUSIC = ["folk", "jazz", "punk", "synth-pop", "blues", "metal", "indie rock"]
_INDUSTRIES = ["shipping", "textile", "software", "mining", "publishing", "aerospace", "brewing"]
_OCCUPATIONS = ["painter", "architect", "novelist", "chemist", "sculptor", "economist", "poet", "engineer"]
_REGIONS = ["the Northern Reach", "the Amber Coast", "the Salt Plains", "the Eastern Marches", "the Cloud Highlands"]
_AWARDS = ["Golden Heron", "Silver Lantern", "Crystal Reed", "Iron Quill"]


@dataclass
class Entity:
    kind: str
    name: str
    attrs: dict = field(default_factory=dict)
    rel: dict = field(default_factory=dict)  # relation name -> Entity
    sentences: list[str] = field(default_factory=list)
    fact_sid: dict = field(default_factory=dict)  # relation/attribute name -> sentence id


class _Names:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()
        self.words: set[str] = set()

    def word(self, lo: int = 2, hi: int = 3) -> str:
        """A new made-up word, never returned before: no entity's name hides inside another's."""
        for _ in range(1000):
            word = "".join(self.rng.choice(_SYLLABLES) for _ in range(self.rng.randint(lo, hi))).capitalize()
            if word not in self.words:
                self.words.add(word)
                return word
        raise RuntimeError("word space exhausted; lower the demo world sizes")

    def unique(self, make) -> str:
        for _ in range(1000):
            name = make()
            if name not in self.used:
                self.used.add(name)
                return name
        raise RuntimeError("name space exhausted; lower the demo world sizes")


def _pronoun(person: Entity) -> tuple[str, str]:
    return ("She", "Her") if person.attrs["gender"] == "f" else ("He", "His")


def _finish(entity: Entity, lead: str, facts: list[tuple[str, str]], extra: list[str], rng: random.Random) -> None:
    """Lead sentence first, then the fact sentences and filler in random order (so fact sentence
    ids vary). ``facts``: (fact name, sentence). Templates keep passages at 2-5 sentences."""
    body = [(name, text) for name, text in facts] + [(None, text) for text in extra]
    rng.shuffle(body)
    entity.sentences = [lead] + [text for _, text in body]
    for sid, (name, _) in enumerate(body, start=1):
        if name is not None:
            entity.fact_sid[name] = sid


class DemoWorld:
    """Builds the entities and their passages; ``claims()`` samples claims from relation chains."""

    def __init__(self, config: DemoConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.names = _Names(self.rng)
        self.entities: dict[str, list[Entity]] = {}
        self._build()

    # ---- world ---------------------------------------------------------------------------------
    def _build(self) -> None:
        c, rng, names = self.config, self.rng, self.names
        countries = [Entity("country", names.unique(lambda: names.word(2, 3))) for _ in range(c.n_countries)]
        for country in countries:
            country.attrs.update(language=names.word(2, 2) + "ese", region=rng.choice(_REGIONS), founded=rng.randint(1400, 1950))
        cities = [Entity("city", names.unique(lambda: names.word(2, 3))) for _ in range(c.n_cities)]
        rivers = [names.unique(lambda: names.word(2, 2)) for _ in range(max(4, c.n_cities // 3))]
        for city in cities:
            city.rel["country"] = rng.choice(countries)
            city.attrs.update(river=rng.choice(rivers), founded=rng.randint(800, 1900), population=rng.randint(20, 900) * 1000)
        unis = [Entity("university", names.unique(lambda: f"University of {names.word(2, 3)}")) for _ in range(c.n_universities)]
        for uni in unis:
            uni.rel["city"] = rng.choice(cities)
            uni.attrs.update(founded=rng.randint(1500, 1990), students=rng.randint(3, 60) * 1000)
        people = [Entity("person", names.unique(lambda: f"{rng.choice(_GIVEN)} {names.word(2, 3)}")) for _ in range(c.n_people)]
        for person in people:
            person.rel.update(birth_city=rng.choice(cities), university=rng.choice(unis))
            person.attrs.update(gender=rng.choice("mf"), born=rng.randint(1900, 1995), occupation=rng.choice(_OCCUPATIONS))
        films = [Entity("film", names.unique(lambda: f"The {names.word(2, 3)} {rng.choice(['Affair', 'Road', 'Winter', 'Letters', 'Tide', 'Garden'])}")) for _ in range(c.n_films)]
        for film in films:
            film.rel.update(director=rng.choice(people), star=rng.choice(people))
            film.attrs.update(year=rng.randint(1950, 2015), genre=rng.choice(_GENRES), award=rng.choice(_AWARDS))
        bands = [Entity("band", names.unique(lambda: f"The {names.word(2, 3)}s")) for _ in range(c.n_bands)]
        for band in bands:
            band.rel.update(founder=rng.choice(people), city=rng.choice(cities))
            band.attrs.update(formed=rng.randint(1960, 2015), genre=rng.choice(_MUSIC), albums=rng.randint(1, 12))
        companies = [Entity("company", names.unique(lambda: f"{names.word(2, 3)} {rng.choice(['Industries', 'Group', 'Works', 'Holdings'])}")) for _ in range(c.n_companies)]
        for company in companies:
            company.rel.update(founder=rng.choice(people), hq=rng.choice(cities))
            company.attrs.update(founded=rng.randint(1850, 2015), industry=rng.choice(_INDUSTRIES))
        novels = []
        for film in rng.sample(films, min(c.n_distractors, len(films))) + rng.choices(films, k=max(0, c.n_distractors - len(films))):
            title = f"{film.name} (novel)" if f"{film.name} (novel)" not in names.used else f"{film.name} ({names.word(2, 2)} novel)"
            names.used.add(title)
            novels.append(Entity("novel", title, rel={"author": rng.choice(people)}, attrs={"year": rng.randint(1900, 2015), "shares": film.name}))
        self.entities = dict(country=countries, city=cities, university=unis, person=people, film=films, band=bands, company=companies, novel=novels)
        for kind, group in self.entities.items():
            for entity in group:
                getattr(self, f"_write_{kind}")(entity)

    def _write_country(self, e: Entity) -> None:
        a = e.attrs
        _finish(e, f"{e.name} is a country in {a['region']}.",
                [("language", f"Its official language is {a['language']}."), ("founded", f"It became independent in {a['founded']}.")],
                [f"The country is known for its {self.rng.choice(['mountains', 'lakes', 'vineyards', 'festivals'])}."], self.rng)
        e.fact_sid["region"] = 0

    def _write_city(self, e: Entity) -> None:
        a, country = e.attrs, e.rel["country"]
        _finish(e, f"{e.name} is a city in {country.name}.",
                [("river", f"It lies on the {a['river']} River."), ("founded", f"It was founded in {a['founded']}.")],
                [f"It has a population of about {a['population']:,}."], self.rng)
        e.fact_sid["country"] = 0

    def _write_university(self, e: Entity) -> None:
        a, city = e.attrs, e.rel["city"]
        _finish(e, f"The {e.name} is a public university in {city.name}.",
                [("founded", f"It was established in {a['founded']}.")],
                [f"It enrols about {a['students']:,} students.", "Its library holds a large collection of maps."], self.rng)
        e.fact_sid["city"] = 0

    def _write_person(self, e: Entity) -> None:
        he, his = _pronoun(e)
        a = e.attrs
        _finish(e, f"{e.name} (born {a['born']}) is a {a['occupation']}.",
                [("birth_city", f"{he} was born in {e.rel['birth_city'].name}."), ("university", f"{he} studied at the {e.rel['university'].name}.")],
                [f"{his} early work drew on local history.", f"{he} has received several regional prizes."], self.rng)
        e.fact_sid.update(born=0, occupation=0)

    def _write_film(self, e: Entity) -> None:
        a = e.attrs
        _finish(e, f"{e.name} is a {a['year']} {a['genre']} film.",
                [("director", f"It was directed by {e.rel['director'].name}."), ("star", f"The film stars {e.rel['star'].name}.")],
                [f"It won the {a['award']} award.", "It was shot on location over two summers."], self.rng)
        e.fact_sid.update(year=0, genre=0)

    def _write_band(self, e: Entity) -> None:
        a = e.attrs
        _finish(e, f"{e.name} are a {a['genre']} band formed in {a['formed']}.",
                [("founder", f"The band was founded by {e.rel['founder'].name}."), ("city", f"They are based in {e.rel['city'].name}.")],
                [f"They have released {a['albums']} albums."], self.rng)
        e.fact_sid["formed"] = 0

    def _write_company(self, e: Entity) -> None:
        a = e.attrs
        _finish(e, f"{e.name} is a {a['industry']} company founded in {a['founded']}.",
                [("founder", f"It was founded by {e.rel['founder'].name}."), ("hq", f"It is headquartered in {e.rel['hq'].name}.")],
                ["It employs staff in several countries."], self.rng)
        e.fact_sid["founded"] = 0

    def _write_novel(self, e: Entity) -> None:
        author = e.rel["author"]
        e.sentences = [f"{e.name.split(' (')[0]} is a {e.attrs['year']} novel by {author.name}.",
                       "It follows two siblings across a long winter.", "It is unrelated to the film of the same name."]

    # ---- claims --------------------------------------------------------------------------------
    # A chain: start entity, then relations; the claim names only the start entity.
    _START = {"film": [("director", "The director of {}"), ("star", "The star of {}")],
              "band": [("founder", "The founder of {}")], "company": [("founder", "The founder of {}")]}
    _VERB = {"birth_city": "was born in", "university": "studied at"}
    _REL_PREP = {"city": "located in", "country": "in"}
    _NOUN = {"city": "a city", "university": "a university", "country": "a country"}

    def _final(self, e: Entity, wrong: bool) -> tuple[str, str, bool]:
        """(attribute name, clause, relative?) describing ``e``; a wrong value when ``wrong``."""
        rng, a = self.rng, e.attrs
        if e.kind == "city":
            if rng.random() < 0.5:
                river = a["river"] if not wrong else rng.choice([r for r in sorted({c.attrs["river"] for c in self.entities["city"]}) if r != a["river"]])
                return "river", f"that lies on the {river} River", True
            year = a["founded"] + (rng.choice([-1, 1]) * rng.randint(3, 60) if wrong else 0)
            return "founded", f"that was founded in {year}", True
        if e.kind == "country":
            language = a["language"] if not wrong else rng.choice([c.attrs["language"] for c in self.entities["country"] if c is not e])
            return "language", f"whose official language is {language}", True
        if e.kind == "university":
            year = a["founded"] + (rng.choice([-1, 1]) * rng.randint(3, 80) if wrong else 0)
            return "founded", f"that was established in {year}", True
        if e.kind == "person":
            if rng.random() < 0.5:
                city = e.rel["birth_city"].name if not wrong else rng.choice([c.name for c in self.entities["city"] if c is not e.rel["birth_city"]])
                return "birth_city", f"was born in {city}", False
            occupation = a["occupation"] if not wrong else rng.choice([o for o in _OCCUPATIONS if o != a["occupation"]])
            return "occupation", f"works as a {occupation}" if occupation[0] not in "aeiou" else f"works as an {occupation}", False
        raise ValueError(e.kind)

    def _claim(self, hops: int, supported: bool) -> dict:
        rng = self.rng
        kind = rng.choice(list(self._START))
        start = rng.choice(self.entities[kind])
        relation, subject = rng.choice(self._START[kind])
        chain = [(start, relation)]
        person = start.rel[relation]
        text = subject.format(start.name)
        if hops == 2:
            attr, clause, _ = self._final(person, wrong=not supported)
            chain.append((person, attr))
            text += f" {clause}."
        else:
            relation2 = "birth_city" if hops == 3 and rng.random() < 0.5 else rng.choice(["birth_city", "university"])
            node = person.rel[relation2]
            chain.append((person, relation2))
            text += f" {self._VERB[relation2]} {self._NOUN[node.kind]}"
            if hops == 4:
                nxt = "country" if node.kind == "city" else "city"
                chain.append((node, nxt))
                text += f" {self._REL_PREP[nxt]} {self._NOUN[node.rel[nxt].kind]}"
                node = node.rel[nxt]
            attr, clause, _ = self._final(node, wrong=not supported)
            chain.append((node, attr))
            text += f" {clause}."
        facts = [[entity.name, entity.fact_sid[name]] for entity, name in chain]
        return {"claim": text, "supporting_facts": facts, "label": "SUPPORTED" if supported else "NOT_SUPPORTED", "num_hops": hops}

    def claims(self, n: int) -> list[dict]:
        out, seen = [], set()
        while len(out) < n:
            hops = [2, 3, 4][len(out) % 3]
            claim = self._claim(hops, supported=self.rng.random() < 0.5)
            if claim["claim"] in seen or len({f[0] for f in claim["supporting_facts"]}) != hops:
                continue  # a chain that revisits an entity is not a k-hop claim
            seen.add(claim["claim"])
            claim["uid"] = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
            claim["hpqa_id"] = f"demo{len(out):05d}"
            out.append(claim)
        return out


def _config_digest(config: DemoConfig) -> str:
    return hashlib.sha256(config.model_dump_json().encode()).hexdigest()[:16]


def write_demo_world(out_dir: Path | str, config: DemoConfig | None = None) -> Path:
    """Write the demo dataset into ``out_dir`` (skipped when already written with the same config,
    so its files keep their fingerprints and later stages reuse their artifacts)."""
    config = config or DemoConfig()
    out_dir = Path(out_dir)
    marker = out_dir / "demo_world.json"
    digest = _config_digest(config)
    if marker.exists() and json.loads(marker.read_text()).get("digest") == digest:
        return out_dir
    world = DemoWorld(config)
    passages = [e for kind, group in world.entities.items() if kind != "novel" for e in group]
    (out_dir / "wiki" / "AA").mkdir(parents=True, exist_ok=True)
    per_file = 500
    for n, start in enumerate(range(0, len(passages), per_file)):
        lines = []
        for i, e in enumerate(passages[start : start + per_file], start=start):
            text = [e.sentences[0]] + [" " + s for s in e.sentences[1:]]  # HotpotQA keeps the leading space
            lines.append(json.dumps({"id": f"demo-{i}", "title": e.name, "text": text}, ensure_ascii=False))
        (out_dir / "wiki" / "AA" / f"wiki_{n:02d}.bz2").write_bytes(bz2.compress(("\n".join(lines) + "\n").encode()))
    with open(out_dir / "beir_corpus.jsonl.gz", "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as fh:
        for i, e in enumerate(world.entities["novel"]):
            row = {"_id": f"novel-{i}", "title": e.name, "text": " ".join(e.sentences), "metadata": {}}
            fh.write((json.dumps(row, ensure_ascii=False) + "\n").encode())
    claims = world.claims(config.n_train_claims + config.n_dev_claims)
    (out_dir / "claims_train.json").write_text(json.dumps(claims[: config.n_train_claims], indent=1, ensure_ascii=False))
    (out_dir / "claims_dev.json").write_text(json.dumps(claims[config.n_train_claims :], indent=1, ensure_ascii=False))
    marker.write_text(json.dumps({"digest": digest, "config": config.model_dump(), "passages": len(passages),
                                  "distractors": len(world.entities["novel"]), "claims": len(claims)}, indent=1))
    return out_dir
