"""The ``longmemeval`` reader: an LLM answers with LongMemEval's answer prompt.

LongMemEval (xiaowu0162/LongMemEval ``src/generation/run_generation.py``, ``prepare_prompt``) puts
the retrieved history chats, the question's date and the question into one user message, at
temperature 0, with 800 answer tokens for its recommended reading method ``con`` (the
step-by-step prompt, ``cot``) and 500 for ``direct``. The judge then reads the whole reply
(``LLMJudge(prompt="longmemeval")``).

Differences: the history is what the memory backend rendered (``DATE:`` headers, ``role: text``
lines, from ``memlab.memory.render_turns``) instead of LongMemEval's ``### Session N: / Session
Date: / Session Content:`` blocks of JSON turns; the context is cut to ``max_context_tokens`` (newest
part kept) only when set, where LongMemEval cuts the history to the model's window.
"""

from __future__ import annotations

from pydantic import Field

from memlab.llm.base import ChatMessage
from memlab.readers.llm import MaxContextTokens, memory_text
from memlab.readers.llm_backed import LLMBackedReader, LLMReaderSettings, require_open_question, text_answer
from memlab.types import Answer, Question, Retrieval

# Verbatim from xiaowu0162/LongMemEval src/generation/run_generation.py (retrieval-based reading,
# no key expansion): fields are history chats, current date, question.
ANSWER_PROMPT_COT = (
    "I will give you several history chats between you and a user. Please answer the question based on the "
    "relevant chat history. Answer the question step by step: first extract all the relevant information, "
    "and then reason over the information to get the answer.\n\n\nHistory Chats:\n\n{}\n\nCurrent Date: {}\n"
    "Question: {}\nAnswer (step by step):"
)
ANSWER_PROMPT_DIRECT = (
    "I will give you several history chats between you and a user. Please answer the question based on the "
    "relevant chat history.\n\n\nHistory Chats:\n\n{}\n\nCurrent Date: {}\nQuestion: {}\nAnswer:"
)


class LongMemEvalReaderConfig(LLMReaderSettings):
    cot: bool = Field(default=True, description="step-by-step prompt (LongMemEval's recommended 'con' reading)")
    max_tokens: int | None = Field(default=None, ge=1, description="answer budget; default 800 with cot, else 500")
    max_context_tokens: MaxContextTokens = None


class LongMemEvalReader(LLMBackedReader):
    name = "longmemeval"
    description = "an LLM answers with LongMemEval's answer prompt (history chats, current date, question)"
    Config = LongMemEvalReaderConfig

    config: LongMemEvalReaderConfig

    @property
    def answer_tokens(self) -> int:
        if self.config.max_tokens is not None:
            return self.config.max_tokens
        return 800 if self.config.cot else 500

    def describe(self) -> str:
        return super().describe() + ("" if self.config.cot else ":direct")

    def messages(self, question: Question, retrieval: Retrieval) -> list[ChatMessage]:
        template = ANSWER_PROMPT_COT if self.config.cot else ANSWER_PROMPT_DIRECT
        history = memory_text(retrieval, self.config.max_context_tokens)
        date = str(question.metadata.get("question_date") or "")
        return [ChatMessage(role="user", content=template.format(history, date, question.text))]

    def answer(self, question: Question, retrieval: Retrieval) -> Answer:
        require_open_question(self.name, question)
        response = self.ask_llm(
            self.messages(question, retrieval), temperature=self.config.llm.temperature, max_tokens=self.answer_tokens
        )
        if isinstance(response, Answer):
            return response  # the request failed
        return text_answer(response.text.strip(), response, self.reply_metadata(response))
