"""VLMEvalKit's ImageMCQ machinery: the ImageMCQ prompt, option inference and the MCQ judge's prompt (pure: the judge
loop that sends it is :mod:`trace_lib.scoring.mcq_judge`).

Mirrors ``VLMEvalKit@a8b12bf1``:

- ``vlmeval/dataset/image_mcq.py:ImageMCQDataset.build_prompt`` -> :func:`build_imagemcq_prompt`;
- ``vlmeval/utils/matching_util.py`` (``can_infer_option``, ``can_infer_text``, ``can_infer``);
- ``vlmeval/dataset/utils/multiple_choice.py`` (``build_choices``, ``build_prompt``/``_cn``/``_blink``/``_wemath``)
  and ``vlmeval/smp/vlm.py:build_option_str`` -> :func:`build_judge_prompt` (``extract_answer_from_item``: the
  loop in :mod:`trace_lib.scoring.mcq_judge`).

Quirks reproduced on purpose (each also named where it happens):

- ``can_infer_text`` lower-cases the caller's choice texts in place, and later calls see the lowered texts;
- a letter counted once is accepted only among the last four tokens; ``answer is <letter>`` is matched
  case-insensitively (``the answer is about`` -> ``A``);
- refusal strings and a bare ``Z`` token yield ``Z`` without the judge;
- the judge prompt is built (``cn_string`` of the question) for every row, so a non-text question fails the slice.
"""

from __future__ import annotations

import re
import string
from typing import Any, Mapping, MutableMapping

from trace_lib.errors import InputError
from trace_lib.extraction.workbook import isna

#: Substring VLMEvalKit treats as "the API failed" (``matching_util``, ``multiple_choice``).
API_FAIL_MARKER = "Failed to obtain answer via API"
#: Replies ``can_infer_option`` maps to ``Z`` (``matching_util.can_infer_option``).
REFUSALS = (
    "Sorry, I can't help with images of people yet.",
    "I can't process this file.",
    "I'm sorry, but without the image provided",
    "Cannot determine the answer",
)
_TOKEN_SEPARATORS = ".()[],:;!*#{}"
_VERBOSE_ANSWER = re.compile(r"(?i)(?:correct\s+)?answer\s+is\s+\**([ABCD])\**")
_CJK = re.compile("[\u4e00-\u9fff]")

Choices = MutableMapping[str, Any]


# -- the model-facing prompt ---------------------------------------------------------------------------------
def build_choices(item: Mapping[str, Any]) -> dict[str, Any]:
    """``{letter: text}`` for every column ``A``..``Z`` the row has and that is not NaN, alphabetical."""
    return {ch: item[ch] for ch in string.ascii_uppercase if ch in item and not isna(item[ch])}


#: The instruction line ``ImageMCQDataset.build_prompt`` appends after the options.
IMAGEMCQ_INSTRUCTION = "Please select the correct answer from the options above. \n"


def build_imagemcq_prompt(row: Mapping[str, Any], *, instruction: str = IMAGEMCQ_INSTRUCTION) -> str:
    """The text item of ``ImageMCQDataset.build_prompt``: Hint / Question / Options / the instruction line.

    ``instruction`` replaces the line for subclasses that only change it (``TreeBench.build_prompt``).
    """
    options = build_choices(row)
    hint = row["hint"] if ("hint" in row and not isna(row["hint"])) else None
    prompt = ""
    if hint is not None:
        prompt += f"Hint: {hint}\n"
    prompt += f"Question: {row['question']}\n"
    if options:
        prompt += "Options:\n" + "".join(f"{key}. {item}\n" for key, item in options.items())
        prompt += instruction
    return prompt


# -- option inference ----------------------------------------------------------------------------------------
def can_infer_option(answer: str, choices: Mapping[str, Any]) -> str | bool:
    """The option letter the text names as a token, ``'Z'``, or ``False`` (``matching_util.can_infer_option``)."""
    if API_FAIL_MARKER in answer:
        return False
    for refusal in REFUSALS:
        if refusal in answer:
            return "Z"
    text = answer
    for ch in _TOKEN_SEPARATORS:
        text = text.replace(ch, " ")
    tokens = [t.strip() for t in text.split()]
    count = sum(1 for c in choices if c in tokens)
    if count == 1:
        for ch in choices:
            # quirk: a letter counted once is accepted only if it first occurs among the last four tokens
            if ch in tokens and tokens.index(ch) > len(tokens) - 5:
                return ch
    elif count == 0 and sum(1 for c in ("Z", "") if c in tokens) == 1:
        return "Z"
    # quirk: case-insensitive "answer is X" (so "the answer is about" reads as A)
    match = _VERBOSE_ANSWER.search(answer or "")
    if match and match.group(1).upper() in choices:
        return match.group(1).upper()
    return False


def can_infer_text(answer: str, choices: Choices) -> str | bool:
    """The one option whose text occurs in the answer, else ``False`` (``matching_util.can_infer_text``).

    Lower-cases ``choices``' texts in place once the length check passes, as upstream does.
    """
    answer = answer.lower()
    if len(answer) > 2 * sum(len(str(v)) for v in choices.values()):
        return False
    for key in choices:
        if key not in string.ascii_uppercase:
            raise InputError("option label is not an uppercase letter", field="choices", found=key)
        choices[key] = str(choices[key]).lower()  # quirk: mutates the caller's dict
    candidates = [key for key in choices if choices[key] in answer]
    return candidates[0] if len(candidates) == 1 else False


def can_infer(answer: Any, choices: Choices) -> str | bool:
    """``can_infer``: option tokens first, then option-text containment; ``False`` when nothing is inferred."""
    text = str(answer)
    option = can_infer_option(text, choices)
    return option if option else can_infer_text(text, choices)


# -- the MCQ judge ---------------------------------------------------------------------------------------------
def build_option_str(choices: Mapping[str, Any]) -> str:
    """``vlmeval/smp/vlm.py:build_option_str``: the option list shown to the MCQ judge."""
    return "There are several options: \n" + "".join(
        f"{c}. {content}\n" for c, content in choices.items() if not isna(content)
    )


_DEFAULT_TEMPLATE = (
    "You are an AI assistant who will help me to match "
    "an answer with several options of a single-choice question. "
    "You are provided with a question, several options, and an answer, "
    "and you need to find which option is most similar to the answer. "
    "If the meaning of all options are significantly different from the answer, output Z. "
    "Your should output a single uppercase character in A, B, C, D (if they are valid options), and Z. \n"
    "Example 1: \n"
    "Question: What is the main object in image?\nOptions: A. teddy bear B. rabbit C. cat D. dog\n"
    "Answer: a cute teddy bear\nYour output: A\n"
    "Example 2: \n"
    "Question: What is the main object in image?\nOptions: A. teddy bear B. rabbit C. cat D. dog\n"
    "Answer: Spider\nYour output: Z\n"
    "Example 3: \n"
    "Question: {}?\nOptions: {}\nAnswer: {}\nYour output: "
)
_CN_TEMPLATE = (
    "你是一个帮助我匹配答案与单选题中多个选项的 AI 助手。"
    "你会被提供：一个问题，多个选项，一个答案。你的任务是找到与答案意义最相近的选项。"
    "如果所有选项的意义都与答案显著不同，则输出 Z。"
    "你应该输出一个单个的大写字母，例如 A, B, C, D（如果它们是有效选项），或 Z。"
    "例 1:"
    "问题: 图中最主要的物体是什么?\n选项: A. 泰迪熊 B. 兔子 C. 猫 D. 狗\n答案: 一只可爱的泰迪熊\n输出: A\n"
    "例 2: \n"
    "问题: 图中最主要的物体是什么?\n选项: A. 泰迪熊 B. 兔子 C. 猫 D. 狗\n答案: 蜘蛛\n输出: Z\n"
    "例 3: \n"
    "问题: {}?\n选项: {}\n答案: {}\n输出: "
)
_BLINK_TEMPLATE = (
    "You are an AI assistant who will help me to match an answer with several options of a single-choice question. "
    "You are provided with a question, several options, and an answer, "
    "and you need to find which option is most similar to the answer. "
    "If the answer says things like refuse to answer, I'm sorry cannot help, etc., output Z."
    "If the meaning of all options are significantly different from the answer, "
    "or the answer does not select any option, output Z. "
    "Your should output one of the choices, A, B, C, D (if they are valid options), or Z.\n"
    "Example 1: \n"
    "Question: Which point is closer to the camera?\nSelect from the following choices.\n"
    "Options: A. Point A\nB. Point B\n(Z) Failed\n"
    "Answer: Point B, where the child is sitting, is closer to the camera.\nYour output: (B)\n"
    "Example 2: \n"
    "Question: Which point is closer to the camera?\nSelect from the following choices.\n"
    "Options: (A) Point A\n(B) Point B\n(Z) Failed\n"
    "Answer: I'm sorry, but I can't assist with that request.\nYour output: (Z)\n"
    "Example 3: \n"
    "Question: Which point is corresponding to the reference point?\nSelect from the following choices.\n"
    "Options: (A) Point A\n(B) Point B\n(Z) Failed\n"
    "Answer:The reference point (REF) on the first image is at the tip of the pot, "
    "which is the part used to Poke if the pots were used for that action. Looking at the second image, "
    "we need to find the part of the object that would correspond to poking.\n"
    "(A) Point A is at the tip of the spoon's handle, which is not used for poking.\n"
    "(B) Point B is at the bottom of the spoon, which is not used for poking.\n"
    "(C) Point C is on the side of the pspoonot, which is not used for poking.\n"
    "(D) Point D is at the tip of the spoon, which is not used for poking.\n"
    "\nTherefore, there is no correct answer in the choices\nYour output: (Z)\n"
    "Example 4: \n"
    "Question: {}?\nOptions: {}\n(Z) Failed\nAnswer: {}\nYour output: "
)
#: Examples 1 and 2 of the ``<start>``/``<end>`` matching prompts (WeMath's here, LogicVista's extraction prompt).
START_END_EXAMPLES = (
    "Example 1: \n"
    "Question: <start>\nWhat is the main object in image?\nOptions: A. teddy bear B. rabbit C. cat D. dog\n<end>\n"
    "Answer: <start>\na cute teddy bear\n<end>\nYour output: A\n"
    "Example 2: \n"
    "Question: <start>\nWhat is the main object in image?\nOptions: A. teddy bear B. rabbit C. cat D. dog\n<end>\n"
    "Answer: <start>\nSpider\n<end>\nYour output: Z\n"
)
_WEMATH_TEMPLATE = (
    "You are an AI assistant who will help me to match "
    "an answer with several options of a single-choice question. "
    "You are provided with a question, several options, and an answer, "
    "and you need to find which option is most similar to the answer. "
    "If the meaning of all options are significantly different from the answer, output Z. "
    "Your should output a single uppercase character in A, B, C, D, E, F, G (if they are valid options), and Z. \n"
) + START_END_EXAMPLES + (
    "Example 3: \n"
    "Question: <start>\n{}\nOptions: {}\n<end>\nAnswer: <start>\n{}\n<end>\nYour output: "
)
_WEMATH_FORMAT_INSTRUCTION = (
    "Regarding the format, please answer following the template below, and be sure to include two <> symbols:\n"
    "<Thought process>: <<your thought process>> <Answer>: <<your option>>"
)


def build_judge_prompt(question: Any, option_str: str, prediction: Any, *, dataset: str | None = None) -> str:
    """The MCQ judge prompt ``extract_answer_from_item`` sends (BLINK, WeMath, Chinese or default variant).

    Raises:
        InputError: the question is not text (upstream's ``cn_string`` raises ``TypeError``).
    """
    if dataset == "BLINK":
        return _BLINK_TEMPLATE.format(question, option_str, prediction)
    if dataset == "WeMath":
        question = question.replace(_WEMATH_FORMAT_INSTRUCTION, "")
        return _WEMATH_TEMPLATE.format(question, option_str, prediction)
    if not isinstance(question, str):
        raise InputError("question is not text; the pinned MCQ matcher cannot build its judge prompt",
                         field="question", found=repr(question))
    if _CJK.search(question):
        return _CN_TEMPLATE.format(question, option_str, prediction)
    return _DEFAULT_TEMPLATE.format(question, option_str, prediction)
