"""The query's words: which words of a text are terms at all (STOPWORDS,
MIN_TERM_LENGTH), the stem that makes two inflections one term, and how
common a word is in English (`word_rank`, `common_word`). Plain functions of
text, shared by the query, the library's word counts and the lorebook keys.
"""

from __future__ import annotations

import re
from functools import lru_cache

from contextbuild.tokens import encoding

from ..ranking.admission import COMMON_WORD_RANK

#: The shortest word that can be a term.
MIN_TERM_LENGTH = 3
#: Terms this short are not trusted to the databases' stemmers: Porter folds
#: them onto stop words that FTS5 keeps ("ate" becomes "at", "ones" "on"), so
#: such a term "matches" nearly every passage. Their matches are checked
#: word by word (knowledge.retrieval) and they are ranked on last
#: (knowledge.termstats).
SHORT_TERM = 4

#: `word_rank` of a word that is not one token: rarer than any that is.
NOT_A_TOKEN = 1 << 30

#: Common English words, which never become terms. Postgres's English
#: configuration drops some of these and SQLite's FTS5 drops none, so the
#: list is applied here, identically, before either database sees a term.
ENGLISH_STOPWORDS = frozenset(
    """
    a about above across after afterwards again against ago all almost alone along already also
    although always am among amongst amount an and another any anybody anyhow anyone anything
    anyway anywhere are aren around as aside at away back be became because become becomes
    becoming been before beforehand behind being below beside besides between beyond both bottom
    but by call can cannot cant could couldn couldnt did didn didnt do does doesn doesnt doing
    don done dont down due during each eight either eleven else elsewhere empty enough etc even
    ever every everybody everyone everything everywhere except few fifteen fifty fill find first
    five for former formerly forty four from front full further get gets getting give given gives
    go goes going gone got had hadn hadnt has hasn hasnt have haven havent having he hed hell hence
    her here hereafter hereby herein hereupon hers herself hes him himself his how however hundred
    i id ie if ill im in inc indeed instead into is isn isnt it its itself ive just keep kept last
    latter latterly least less let lets like likely ltd made make makes many may maybe me meanwhile
    might mine more moreover most mostly move much must mustn my myself name namely neither never
    nevertheless next nine no nobody none noone nor not nothing now nowhere of off often on once
    one only onto or other others otherwise our ours ourselves out over own part per perhaps please
    put rather re really same say says see seem seemed seeming seems seen serious several shall
    shan she shed shell shes should shouldn shouldnt show side since six sixty so some somebody
    somehow someone something sometime sometimes somewhere still such take taken takes ten than
    that thats the their theirs them themselves then thence there thereafter thereby therefore
    therein theres thereupon these they theyd theyll theyre theyve thing things third this those
    though three through throughout thru thus to together too took top toward towards twelve
    twenty two un under unless until up upon us use used uses using very via was wasn wasnt way we
    wed well were weren werent weve what whatever whats when whence whenever where whereafter
    whereas whereby wherein wheres whereupon wherever whether which while whither who whoever
    whole whom whose why will with within without won wont would wouldn wouldnt yes yet you youd
    youll your youre yours yourself yourselves youve able actually ah already anyways asked ask
    asks began begin begins behold certainly clearly came come comes coming does enough especially
    eventually everything fine getting gotten guess hello hey hmm indeed inside instead kind kinds
    knew know knows known later lot lots meant mean means merely mostly nearly need needs needed
    new newer nobody nothing oh ok okay old onto outside perhaps plenty pretty quite rather ready
    right said seemed sure tell tells told thank thanks think thinks thought tried tries try trying
    want wants wanted whilst yeah yours able across almost along already among anyone around
    become before began behind being below beneath beside between beyond bring brings brought
    """.split()
)

#: Words every narration is full of whatever it is about: the second-person
#: address, speech and glance verbs, and the furniture of a turn.
NARRATIVE_FILLER = frozenset(
    """
    you your yours yourself says said say saying asks asked ask replies replied reply answer
    answers answered tells told tell look looks looked looking glance glances glanced see sees saw
    watch watches watched feel feels felt hear hears heard turn turns turned walk walks walked step
    steps stepped stand stands stood sit sits sat nod nods nodded smile smiles smiled shrug shrugs
    shrugged sigh sighs sighed voice voices moment moments little bit seems seem appear appears
    appeared begin begins began start starts started continue continues continued open opens
    opened close closes closed hand hands head eyes eye face way ways time times place thing
    things someone something anything everything nothing yes okay perhaps maybe quietly slowly
    suddenly softly again still just now then finally already almost another toward towards
    around away across inside outside behind front back left right long short good bad great
    small large big first last next same other others even also only very really much many
    action actions player narrator story scene turn chapter continue reader
    """.split()
)

STOPWORDS = ENGLISH_STOPWORDS | NARRATIVE_FILLER

WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """The meaningful words of `text`, lowercased, in order, repeats kept.

    Apostrophes split words ("Aldric's" gives "aldric" and "s"), and the
    leftover letter is shorter than any term, so possessives need no rule.
    """
    found = []
    for word in WORD.findall(text.lower()):
        if len(word) < MIN_TERM_LENGTH or word.isdigit() or word in STOPWORDS:
            continue
        found.append(word)
    return found


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix-stripping key, so "harbour" and "harbours" are one term.

    Both databases stem (Porter in FTS5, Snowball in Postgres), so two
    inflections in the query would match the same passage twice and count as
    two signals. This key only has to merge the common inflections; a pair it
    misses costs at most a duplicate term.
    """
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith("sses"):
        return word[:-2]
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@lru_cache(maxsize=65536)
def _word_key(word: str) -> str | None:
    """The key of a lowercased word that `words` keeps, else None."""
    if len(word) < MIN_TERM_LENGTH or word.isdigit() or word in STOPWORDS:
        return None
    return stem(word)


#: Every byte but a lowercase ASCII letter or digit becomes a space: for
#: ASCII text, splitting on them finds exactly WORD's words.
_ASCII_SEPARATORS = bytes(c if chr(c) in "abcdefghijklmnopqrstuvwxyz0123456789" else 32 for c in range(256))
#: The keys of ASCII words, by their bytes (the fast path's own cache).
_ascii_keys: dict[bytes, str | None] = {}
ASCII_KEYS_KEPT = 200_000


def passage_keys(heading_path: str, text: str) -> set[str]:
    """The word keys a passage holds, its heading trail included: what a
    term is looked up in when the database's match is not taken as read.
    Each distinct word is judged once (a passage repeats most of its words),
    so a turn's candidates cost a set and a cached lookup per word. ASCII
    text, most lore, is split on bytes (half the time of the expression
    over a turn's 80 candidates, 2 ms a turn at 1,100 characters each)."""
    lowered = f"{heading_path} {text}".lower()
    if not lowered.isascii():
        keys = {_word_key(word) for word in set(WORD.findall(lowered))}
    else:
        if len(_ascii_keys) > ASCII_KEYS_KEPT:
            _ascii_keys.clear()
        keys = set()
        for word in set(lowered.encode("ascii").translate(_ASCII_SEPARATORS).split()):
            key = _ascii_keys.get(word, "")
            if key == "":
                key = _ascii_keys[word] = _word_key(word.decode("ascii"))
            keys.add(key)
    keys.discard(None)
    return keys


def terms(text: str) -> list[str]:
    """Distinct meaningful words of `text` in order of first appearance,
    one surface form per stem."""
    seen: set[str] = set()
    found = []
    for word in words(text):
        key = stem(word)
        if key not in seen:
            seen.add(key)
            found.append(word)
    return found


@lru_cache(maxsize=65536)
def word_rank(word: str) -> int:
    """How common `word` is in English: its cl100k token rank, or
    NOT_A_TOKEN when it is not one token. A BPE vocabulary is merged in order
    of frequency in a large general corpus, so its rank is a word-frequency
    list that is already on disk; "years", "real", "sell" rank in the low
    thousands, while "reliquary", "smugglers" or "Tillinghast" are not
    single tokens at all."""
    tokens = encoding().encode_ordinary(" " + word)
    return tokens[0] if len(tokens) == 1 else NOT_A_TOKEN


def common_word(word: str) -> bool:
    """An everyday English word: ranked below knowledge.ranking.admission.COMMON_WORD_RANK."""
    return word_rank(word) < COMMON_WORD_RANK
