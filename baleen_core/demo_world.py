"""A seeded generator of a fictional multi-hop world, written in HoVer's upstream formats.

The world tests what Baleen is for: a claim names one entity, and the rest of its evidence can be
found only through entities named in earlier evidence. Entities (countries, cities, universities,
people, films, bands, companies) have attributes and relations; each gets a Wikipedia-style intro
of 3-5 sentences. Claims follow relation chains of 2, 3 or 4 passages: the start entity is named,
the bridges never are, and the final attribute is one many entities share (a river, a century, a
language, an occupation), so the last passage cannot be found from the claim alone.
NOT_SUPPORTED claims swap that final value for a wrong one of the same kind.

Fair to both retrievers, as real intros are:

- **names read as words** (given names, surnames and places built from English name parts), so
  word pieces and BM25 tokens behave as on real names; and they **collide**: people share
  surnames, companies carry founders' surnames, a novel shares each of many films' titles;
- **passages differ**: every fact has several phrasings, filler sentences carry entity-specific
  details (and name other entities, as real intros do), pronouns follow the person's given name;
- **train and dev are split by chain**: the start entities of dev claims start no training claim,
  so no dev claim shares its gold passage chain (or its first two passages) with a training claim.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from baleen_core.config import DemoConfig

_GIVEN_FEMALE = ("Alice Clara Helen Margaret Ruth Edith Irene Julia Lydia Nora Rosa Vera Agnes Beatrice Celia Dora "
                 "Eleanor Frances Grace Harriet Ida Laura Mabel Nina Olive Phoebe Sylvia Theresa Ursula Maud Anna Bridget "
                 "Cecily Daphne Esther Fiona Gwen Hilda Isobel Joan Kathleen Louisa Miriam Norah Pauline Rachel Sarah "
                 "Tessa Violet Winifred Yvonne Zoe Amelia Bertha Constance Dorothy Evelyn Florence Gertrude Hazel").split()
_GIVEN_MALE = ("Arthur Bernard Charles Daniel Edmund Felix George Henry Isaac Jonah Leonard Martin Nathan Oscar Peter "
               "Ralph Samuel Thomas Victor Walter Albert Cyril Dennis Ernest Francis Gilbert Hugh Lionel Owen Stanley "
               "Ambrose Basil Clement Douglas Edgar Frederick Gordon Harold Ivor Jasper Kenneth Lawrence Maurice Neville "
               "Percy Quentin Rupert Sidney Timothy Vincent William Alfred Benedict Conrad Duncan Eustace Gerald Horace").split()
_SURNAME_HEAD = "Ash Black Brad Brook Cald Clay Crane Dun Fair Fen Green Hart Hol Kings Lang Mar Mor Pem Red Ros Stan Thorn Whit Wel Wyn Hal Ald Pen".split()
_SURNAME_TAIL = "ford wood ley ton by well field more ham croft ridge worth den stead wick combe".split()
_PLACE_HEAD = "Stone Mill Elm Oak Bright Cold Silver Lake Glen Hazel Marsh Salt West North High Broad Long Fox Wolf Swan Heron Ember Rush Cross".split()
_PLACE_TAIL = "haven brook port bridge mouth gate fold bury minster holm mere dale".split()
_COUNTRY_HEAD = "Nor Ost Val Cas Mer Lor Ard Bel Dra Sel Tor Ver Alb Kor".split()
_COUNTRY_TAIL = "land mark avia oria heim mont".split()
# Final values are shared by many passages (a claim's last passage must not be found from the
# claim alone): few rivers, languages and centuries, each also named in other entities' intros.
_RIVER = "Wend Lyre".split()
_LANGUAGE = "Norric Ostian".split()
_FOUNDED = (1101, 1400)  # cities and institutions, founded in the 12th-14th centuries
_REGIONS = ("in the northern highlands", "on the western coast", "in the central plains", "in the southern islands", "on the eastern steppe")
INSTITUTION_KINDS = ("University", "College", "Academy", "Polytechnic", "Institute")
_TITLE_ADJ = ("Silent Last Golden Broken Hidden Distant Quiet Burning Northern Winter Paper Glass Iron Velvet Crimson "
              "Wandering Hollow Bitter Secret Lost Scarlet Frozen Gentle Restless Painted Sleeping Faithful Lonely "
              "Midnight Emerald Wild Borrowed Crooked Narrow Amber Tender Savage Patient Fallen Blind").split()
_TITLE_NOUN = ("Harbour Road Letters Garden Tide Summer Orchard Lantern Crossing Echo Frontier Mirror Season Shore Kingdom "
               "Voyage Bridge Meadow Compass Lighthouse Carnival Archive Verdict Harvest Covenant Orchestra Island "
               "Inheritance Passenger Telegram Chapel Fortress Balcony Labyrinth Monsoon Canal Quarry Pavilion").split()
_TITLE_FORMS = ("The {adj} {noun}", "{adj} {noun}", "The {noun} of {place}", "{given}'s {noun}", "A {noun} in {season}", "Beyond the {noun}")
_SEASONS = ("Spring", "Autumn", "Winter", "Summer", "August", "December", "May")
_BAND_ADJ = ("Velvet Electric Paper Neon Wooden Hollow Silver Northern Restless Painted Cosmic Static Broken Golden "
             "Lunar Crimson Quiet Stray Vintage Midnight").split()
_BAND_NOUN = ("Lanterns Kites Foxes Wolves Pilots Sailors Engines Rivers Shadows Mirrors Ravens Strangers Owls Comets "
              "Architects Tigers Parades Satellites Orchids Arrows Magpies Saints Drifters Harbours").split()
_COMPANY_SUFFIX = ("Brothers", "and Sons", "Industries", "Holdings", "Group")
_OCCUPATIONS = ("actor", "director", "screenwriter", "painter", "novelist", "composer", "architect", "photographer", "journalist", "engineer")
_FILM_GENRES = ("drama", "comedy", "thriller", "documentary", "science fiction", "musical", "western", "horror")
_MUSIC_GENRES = ("folk", "jazz", "punk", "synth-pop", "blues", "metal", "indie rock")
_INDUSTRIES = ("shipping", "textiles", "software", "mining", "publishing", "aerospace", "brewing", "glassmaking")
_AWARDS = ("Golden Heron", "Silver Lantern", "Crystal Reed", "Iron Quill", "Amber Medal")
_FEATURES = ("its old harbour", "its stone bridges", "its spring fair", "its cathedral", "its botanical garden", "its salt marshes")
_LANDSCAPES = ("mountains", "lakes", "vineyards", "festivals", "forests", "fjords")
_SUBJECTS = ("law", "medicine", "engineering", "music", "agriculture", "mathematics", "fine art")
_PRODUCTS = ("ships", "fabrics", "accounting software", "copper", "schoolbooks", "aircraft parts", "beer", "bottles")
_PLOTS = ("two siblings across a long winter", "a surveyor lost in the hills", "a family feud over an orchard",
          "a clerk who inherits a failing theatre", "three friends on a coastal voyage", "a detective in a river town")


def article(word: str) -> str:
    """``a`` or ``an`` before ``word`` (by its first letter: enough for this world's words)."""
    word = word.lower()
    return "an" if word[0] in "aeiou" and not word.startswith(("uni", "use", "eu")) else "a"


def _the(name: str) -> str:
    """'the University of X' but 'Hartley College', as written in running text."""
    return f"the {name}" if name.startswith("University of") else name


def century(year: int) -> str:
    """1146 -> '12th century'."""
    n = (year - 1) // 100 + 1
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix} century"


@dataclass
class Entity:
    kind: str
    name: str
    attrs: dict = field(default_factory=dict)
    rel: dict = field(default_factory=dict)  # relation name -> Entity
    sentences: list[str] = field(default_factory=list)
    fact_sid: dict = field(default_factory=dict)  # relation/attribute name -> sentence id

    @property
    def pronouns(self) -> tuple[str, str]:
        """(subject, possessive) for a person, from the gender of the given name."""
        return ("She", "Her") if self.attrs["gender"] == "f" else ("He", "His")


class _Names:
    """Unique titles drawn from name parts, so every title names one passage."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def unique(self, make: Callable[[], str]) -> str:
        for _ in range(5000):
            name = make()
            if name not in self.used:
                self.used.add(name)
                return name
        raise RuntimeError("name space exhausted; lower the demo world sizes")

    def compound(self, heads: tuple[str, ...] | list[str], tails: tuple[str, ...] | list[str]) -> str:
        return self.rng.choice(heads) + self.rng.choice(tails)


def _finish(entity: Entity, lead: str, facts: list[tuple[str, str]], filler: list[str], rng: random.Random) -> None:
    """Lead sentence first, then the fact sentences and filler in random order (so fact sentence
    ids vary). ``facts``: (fact name, sentence)."""
    body = [(name, text) for name, text in facts] + [(None, text) for text in filler]
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
        countries = [Entity("country", names.unique(lambda: names.compound(_COUNTRY_HEAD, _COUNTRY_TAIL))) for _ in range(c.n_countries)]
        for country in countries:
            country.attrs.update(language=rng.choice(_LANGUAGE), region=rng.choice(_REGIONS), independent=rng.randint(1500, 1980))
        cities = [Entity("city", names.unique(lambda: names.compound(_PLACE_HEAD, _PLACE_TAIL))) for _ in range(c.n_cities)]
        for city in cities:
            city.rel["country"] = rng.choice(countries)
            city.attrs.update(river=rng.choice(_RIVER), founded=rng.randint(*_FOUNDED), population=rng.randint(20, 900) * 1000,
                              industry=rng.choice(_INDUSTRIES), feature=rng.choice(_FEATURES))
        # surnames come from a pool smaller than the people, so families and namesakes share them
        surnames = sorted({names.compound(_SURNAME_HEAD, _SURNAME_TAIL) for _ in range(max(8, c.n_people * 2 // 3))})
        unis = []
        for _ in range(c.n_universities):
            kind = rng.choice(INSTITUTION_KINDS)
            make = (lambda k=kind: f"{k} of {names.compound(_PLACE_HEAD, _PLACE_TAIL)}") if kind == "University" else (lambda k=kind: f"{rng.choice(surnames)} {k}")
            unis.append(Entity("university", names.unique(make), attrs={"kind": kind}))
        for uni in unis:
            uni.rel["city"] = rng.choice(cities)
            uni.attrs.update(founded=rng.randint(*_FOUNDED), students=rng.randint(3, 60) * 1000, subject=rng.choice(_SUBJECTS))
        people = []
        for _ in range(c.n_people):
            gender = rng.choice("fm")
            given = _GIVEN_FEMALE if gender == "f" else _GIVEN_MALE
            person = Entity("person", names.unique(lambda g=given: f"{rng.choice(g)} {rng.choice(surnames)}"), attrs={"gender": gender})
            person.rel.update(birth_city=rng.choice(cities), university=rng.choice(unis))
            person.attrs.update(born=rng.randint(1900, 1995), occupation=rng.choice(_OCCUPATIONS))
            people.append(person)
        films = [Entity("film", names.unique(self._title)) for _ in range(c.n_films)]
        for film in films:
            film.rel.update(director=rng.choice(people), star=rng.choice(people))
            film.attrs.update(year=rng.randint(1950, 2015), genre=rng.choice(_FILM_GENRES), award=rng.choice(_AWARDS), minutes=rng.randint(80, 170))
        bands = [Entity("band", names.unique(lambda: f"The {rng.choice(_BAND_ADJ)} {rng.choice(_BAND_NOUN)}")) for _ in range(c.n_bands)]
        for band in bands:
            band.rel.update(founder=rng.choice(people), city=rng.choice(cities))
            band.attrs.update(formed=rng.randint(1960, 2015), genre=rng.choice(_MUSIC_GENRES), albums=rng.randint(1, 12))
        companies = []
        for _ in range(c.n_companies):
            founder, free = None, []
            while not free:  # companies carry their founder's surname, as family firms do
                founder = rng.choice(people)
                free = [f"{founder.name.split()[-1]} {suffix}" for suffix in _COMPANY_SUFFIX if f"{founder.name.split()[-1]} {suffix}" not in names.used]
            company = Entity("company", names.unique(lambda free=free: rng.choice(free)))
            company.rel.update(founder=founder, hq=rng.choice(cities))
            company.attrs.update(founded=rng.randint(1850, 2015), industry=rng.choice(_INDUSTRIES), staff=rng.randint(1, 90) * 100)
            companies.append(company)
        novels = []  # distractors: a novel shares a film's title, as real titles collide
        for film in rng.sample(films, min(c.n_distractors, len(films))):
            novels.append(Entity("novel", f"{film.name} (novel)", rel={"author": rng.choice(people)},
                                 attrs={"year": rng.randint(1900, 2015), "plot": rng.choice(_PLOTS)}))
        self.entities = dict(country=countries, city=cities, university=unis, person=people, film=films, band=bands, company=companies, novel=novels)
        for kind, group in self.entities.items():
            for entity in group:
                getattr(self, f"_write_{kind}")(entity)

    def _title(self) -> str:
        """A film (or book) title in one of several forms, as real titles vary."""
        rng = self.rng
        form = rng.choice(_TITLE_FORMS)
        title = form.format(adj=rng.choice(_TITLE_ADJ), noun=rng.choice(_TITLE_NOUN), place=self.names.compound(_PLACE_HEAD, _PLACE_TAIL),
                           given=rng.choice(_GIVEN_FEMALE + _GIVEN_MALE), season=rng.choice(_SEASONS))
        return "An" + title[1:] if title.startswith("A ") and article(title[2:]) == "an" else title

    def _other(self, kind: str, not_this: Entity | None = None) -> Entity:
        return self.rng.choice([e for e in self.entities[kind] if e is not not_this])

    def _pick(self, options: list[str], n: int) -> list[str]:
        return self.rng.sample(options, min(n, len(options)))

    def _write_country(self, e: Entity) -> None:
        a, rng = e.attrs, self.rng
        capital = next((c for c in self.entities["city"] if c.rel["country"] is e), None)
        filler = [f"It is known for its {rng.choice(_LANDSCAPES)}.", f"Its economy relies on {rng.choice(_INDUSTRIES)}."]
        if capital is not None:
            filler.append(f"Its capital is {capital.name}.")
        _finish(e, rng.choice([f"{e.name} is a country {a['region']}.", f"{e.name} is a small republic {a['region']}."]),
                [("language", rng.choice([f"Its official language is {a['language']}.", f"Most of its people speak {a['language']}, the official language."])),
                 ("independent", f"It became independent in {a['independent']}.")],
                self._pick(filler, rng.randint(1, 2)), rng)
        e.fact_sid["region"] = 0

    def _write_city(self, e: Entity) -> None:
        a, rng, country = e.attrs, self.rng, e.rel["country"]
        lead = rng.choice([f"{e.name} is a city in {country.name}.", f"{e.name} is a market town in {country.name}.",
                           f"{e.name} is a port city in {country.name}."])
        river = rng.choice([f"It lies on the {a['river']} river.", f"The city stands on the banks of the {a['river']}.",
                            f"The {a['river']} river flows through its centre."])
        founded = rng.choice([f"It was founded in the {century(a['founded'])}.", f"The town dates from the {century(a['founded'])}."])
        filler = [f"It has a population of about {a['population']:,}.", f"Its economy is based on {a['industry']}.",
                  f"It is known for {a['feature']}.", f"It is twinned with {self._other('city', e).name}.",
                  f"Its oldest church dates from the {century(rng.randint(*_FOUNDED))}."]
        _finish(e, lead, [("river", river), ("founded", founded)], self._pick(filler, rng.randint(1, 2)), rng)
        e.fact_sid["country"] = 0

    def _write_university(self, e: Entity) -> None:
        a, rng, city = e.attrs, self.rng, e.rel["city"]
        name = f"The {e.name}" if e.name.startswith("University of") else e.name
        lead = rng.choice([f"{name} is a public {a['kind'].lower()} in {city.name}.", f"{name} is {article(a['kind'])} {a['kind'].lower()} based in {city.name}."])
        founded = rng.choice([f"It was established in the {century(a['founded'])}.", f"It was founded in the {century(a['founded'])}."])
        filler = [f"It enrols about {a['students']:,} students.", f"It is best known for its school of {a['subject']}.",
                  f"Its library holds over {self.rng.randint(2, 90) * 10_000:,} volumes.",
                  f"Its oldest hall dates from the {century(rng.randint(*_FOUNDED))}."]
        _finish(e, lead, [("founded", founded)], self._pick(filler, rng.randint(1, 2)), rng)
        e.fact_sid["city"] = 0

    def _write_person(self, e: Entity) -> None:
        he, his = e.pronouns
        a, rng = e.attrs, self.rng
        occupation = a["occupation"]
        lead = rng.choice([f"{e.name} (born {a['born']}) is {article(occupation)} {occupation}.",
                           f"{e.name} is {article(occupation)} {occupation}, born in {a['born']}."])
        city, uni = e.rel["birth_city"].name, _the(e.rel["university"].name)
        birth = rng.choice([f"{he} was born in {city}.", f"{he} was born and raised in {city}.", f"{he} grew up in {city}, where {he.lower()} was born."])
        study = rng.choice([f"{he} studied at {uni}.", f"{he} was educated at {uni}.", f"{he} graduated from {uni} in {a['born'] + 22}."])
        filler = [f"{his} best-known work, {self._title()}, appeared in {a['born'] + rng.randint(25, 40)}.",
                  f"In {a['born'] + rng.randint(25, 45)} {he.lower()} moved to {self._other('city', e.rel['birth_city']).name}.",
                  f"{he} received the {rng.choice(_AWARDS)} award in {a['born'] + rng.randint(30, 60)}.",
                  f"{he} was married to {self._other('person', e).name}.",
                  f"{he} lives on the banks of the {rng.choice(_RIVER)}.", f"{he} speaks fluent {rng.choice(_LANGUAGE)}.",
                  f"{his} family can trace its roots to the {century(rng.randint(*_FOUNDED))}."]
        _finish(e, lead, [("birth_city", birth), ("university", study)], self._pick(filler, rng.randint(1, 2)), rng)
        e.fact_sid.update(born=0, occupation=0)

    def _write_film(self, e: Entity) -> None:
        a, rng = e.attrs, self.rng
        genre = f"{a['genre']} film"
        lead = rng.choice([f"{e.name} is a {a['year']} {genre}.", f"{e.name} is {article(genre)} {genre} released in {a['year']}."])
        director = rng.choice([f"It was directed by {e.rel['director'].name}.", f"{e.rel['director'].name} directed the film."])
        star = rng.choice([f"The film stars {e.rel['star'].name}.", f"{e.rel['star'].name} plays the lead role."])
        filler = [f"It won the {a['award']} award in {a['year'] + 1}.", f"It was shot in {self._other('city').name}.",
                  f"The score was written by {self._other('person').name}.", f"It runs for {a['minutes']} minutes.",
                  f"Its dialogue is in {rng.choice(_LANGUAGE)}."]
        _finish(e, lead, [("director", director), ("star", star)], self._pick(filler, rng.randint(1, 2)), rng)
        e.fact_sid.update(year=0, genre=0)

    def _write_band(self, e: Entity) -> None:
        a, rng = e.attrs, self.rng
        lead = rng.choice([f"{e.name} are {article(a['genre'])} {a['genre']} band formed in {a['formed']}.",
                           f"{e.name} are a band that has played {a['genre']} since {a['formed']}."])
        founder = rng.choice([f"The band was founded by {e.rel['founder'].name}.", f"{e.rel['founder'].name} started the group."])
        city = rng.choice([f"They are based in {e.rel['city'].name}.", f"The group is based in {e.rel['city'].name}."])
        filler = [f"They have released {a['albums']} albums.", f"They toured with {self._other('band', e).name} in {a['formed'] + rng.randint(1, 8)}.",
                  f"Their first album was produced by {self._other('person', e.rel['founder']).name}.",
                  f"They sing in {rng.choice(_LANGUAGE)}.", f"Their second album is named after the {rng.choice(_RIVER)} river."]
        _finish(e, lead, [("founder", founder), ("city", city)], self._pick(filler, rng.randint(1, 2)), rng)
        e.fact_sid["formed"] = 0

    def _write_company(self, e: Entity) -> None:
        a, rng = e.attrs, self.rng
        lead = rng.choice([f"{e.name} is {article(a['industry'])} {a['industry']} company founded in {a['founded']}.",
                           f"{e.name} is a company in the {a['industry']} business, founded in {a['founded']}."])
        founder = rng.choice([f"It was founded by {e.rel['founder'].name}.", f"{e.rel['founder'].name} founded the firm."])
        hq = rng.choice([f"It is headquartered in {e.rel['hq'].name}.", f"Its head office is in {e.rel['hq'].name}."])
        filler = [f"It employs about {a['staff']:,} people.", f"Its main products are {_PRODUCTS[_INDUSTRIES.index(a['industry'])]}.",
                  f"It has a plant in {self._other('city', e.rel['hq']).name}.", f"Its barges carry goods along the {rng.choice(_RIVER)}."]
        _finish(e, lead, [("founder", founder), ("hq", hq)], self._pick(filler, rng.randint(1, 2)), rng)
        e.fact_sid["founded"] = 0

    def _write_novel(self, e: Entity) -> None:
        a, rng = e.attrs, self.rng
        title = e.name.removesuffix(" (novel)")
        e.sentences = [f"{title} is a {a['year']} novel by {e.rel['author'].name}.", f"It follows {a['plot']}.",
                       rng.choice(["It is unrelated to the film of the same name.", f"It was first published in {self._other('city').name}."])]

    # ---- claims --------------------------------------------------------------------------------
    # The claim names only the start entity; each later passage is found through the one before.
    _START = {"film": [("director", ("The director of {}", "The person who directed {}", "{}'s director")),
                       ("star", ("The star of {}", "The lead actor of {}"))],
              "band": [("founder", ("The founder of {}", "The person who founded {}"))],
              "company": [("founder", ("The founder of {}", "{}'s founder"))]}

    def _final(self, e: Entity, wrong: bool) -> tuple[str, str]:
        """(fact name, clause) describing ``e`` by a value many entities share; a wrong value when ``wrong``."""
        rng, a = self.rng, e.attrs

        def value(true: str, options: list[str]) -> str:
            return true if not wrong else rng.choice(sorted({o for o in options if o != true}))

        if e.kind == "city":
            if rng.random() < 0.5:
                return "river", f"that lies on the {value(a['river'], list(_RIVER))} river"
            return "founded", f"that was founded in the {value(century(a['founded']), [century(c.attrs['founded']) for c in self.entities['city']])}"
        if e.kind == "country":
            return "language", f"whose official language is {value(a['language'], list(_LANGUAGE))}"
        if e.kind == "university":
            return "founded", f"that was founded in the {value(century(a['founded']), [century(u.attrs['founded']) for u in self.entities['university']])}"
        if e.kind == "person":
            if rng.random() < 0.5:
                city = value(e.rel["birth_city"].name, [c.name for c in self.entities["city"]])
                return "birth_city", f"was born in {city}"
            occupation = value(a["occupation"], list(_OCCUPATIONS))
            return "occupation", f"works as {article(occupation)} {occupation}"
        raise ValueError(e.kind)

    def _claim(self, start: Entity, hops: int, supported: bool) -> dict:
        rng = self.rng
        relation, subjects = rng.choice(self._START[start.kind])
        chain = [(start, relation)]
        person = start.rel[relation]
        template = rng.choice(subjects)
        if template.startswith("{}'s ") and start.name.endswith("s"):  # "Hartley Brothers' founder"; a title's own "'s" left alone
            template = "{}' " + template.removeprefix("{}'s ")
        text = template.format(start.name)
        if hops == 2:
            attr, clause = self._final(person, wrong=not supported)
            chain.append((person, attr))
            text += f" {clause}."
        else:
            relation2 = rng.choice(["birth_city", "university"])
            node = person.rel[relation2]
            chain.append((person, relation2))
            # "an institution", not its kind: "a college" would narrow 24 institutions to a handful
            text += " was born in a city" if relation2 == "birth_city" else " studied at an institution"
            if hops == 4:
                nxt = "country" if node.kind == "city" else "city"
                chain.append((node, nxt))
                text += " in a country" if nxt == "country" else " located in a city"
                node = node.rel[nxt]
            attr, clause = self._final(node, wrong=not supported)
            chain.append((node, attr))
            text += f" {clause}."
        facts = [[entity.name, entity.fact_sid[name]] for entity, name in chain]
        return {"claim": text[0].upper() + text[1:], "supporting_facts": facts, "label": "SUPPORTED" if supported else "NOT_SUPPORTED", "num_hops": hops}

    #: Share of the start entities whose chains are dev-only: fixed, so that the dev claims stay
    #: the same when the number of training claims changes.
    DEV_START_SHARE = 0.2

    def starts(self) -> tuple[list[Entity], list[Entity]]:
        """The start entities of training and of dev claims: disjoint, so no dev claim shares its
        gold passage chain with a training claim."""
        starts = [e for kind in self._START for e in self.entities[kind]]
        self.rng.shuffle(starts)
        n_dev = max(1, round(len(starts) * self.DEV_START_SHARE))
        return starts[n_dev:], starts[:n_dev]

    def claims(self, n: int, starts: list[Entity], seen: set[str], offset: int = 0) -> list[dict]:
        out = []
        for _ in range(50 * n):
            if len(out) == n:
                return out
            hops = [2, 3, 4][len(out) % 3]
            claim = self._claim(self.rng.choice(starts), hops, supported=self.rng.random() < 0.5)
            if claim["claim"] in seen or len({f[0] for f in claim["supporting_facts"]}) != hops:
                continue  # a chain that revisits an entity is not a k-hop claim
            seen.add(claim["claim"])
            claim["uid"] = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
            claim["hpqa_id"] = f"demo{offset + len(out):05d}"
            out.append(claim)
        raise RuntimeError(f"only {len(out)} distinct claims from {len(starts)} start entities; raise the demo world sizes")


def _config_digest(config: DemoConfig) -> str:
    return hashlib.sha256((config.model_dump_json() + _WORLD_VERSION).encode()).hexdigest()[:16]


_WORLD_VERSION = "4"  # bump when the generator changes, so a written world is rewritten


DEV_ID_OFFSET = 90_000  # dev claims' hpqa_ids start here, past any training id a demo world can draw (a few thousand)


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
    for old in (out_dir / "wiki" / "AA").glob("wiki_*.bz2"):
        old.unlink()  # a smaller world than the last one leaves no stale file behind
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
    train_starts, dev_starts = world.starts()
    seen: set[str] = set()
    # dev first, so the dev claims do not depend on how many training claims are drawn after them
    dev = world.claims(config.n_dev_claims, dev_starts, seen, offset=DEV_ID_OFFSET)
    train = world.claims(config.n_train_claims, train_starts, seen)
    (out_dir / "claims_train.json").write_text(json.dumps(train, indent=1, ensure_ascii=False))
    (out_dir / "claims_dev.json").write_text(json.dumps(dev, indent=1, ensure_ascii=False))
    marker.write_text(json.dumps({"digest": digest, "config": config.model_dump(), "passages": len(passages),
                                  "distractors": len(world.entities["novel"]), "claims": len(train) + len(dev)}, indent=1))
    return out_dir
