"""The examples of the API docs: one real request per operation and one real body per documented error.

"Try it out" on the docs page sends these requests as they are, so they name what the demo profile
really serves: its simulator ``tiny-student-sft`` and metrics that need no trained model
(``rouge_l``, ``cosine``). The error bodies are what the service answers to the input their summary
describes (type, message, field, as :mod:`simhub.serving.errors` builds them).
``tests/integration/test_serving_examples.py`` posts every request example to the app and provokes
every documented error, so an example that stops working fails a test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from litestar.openapi.spec import Example

from simhub.serving.schemas import EXAMPLE_SIMULATOR

#: A simulator of the demo profile (``simhub/resources/profiles/demo.yaml``).
DEMO_SIMULATOR = EXAMPLE_SIMULATOR
#: Metrics the demo profile serves that need no trained model.
DEMO_METRICS = ("rouge_l", "cosine")

#: An Eedi-style question: the question text, then the four options, as the QATD-2k files write it.
QUESTION = {
    "text": ("Question Text: Which of these is equivalent to 3/4?\nAnswer A Text: 6/8\nAnswer B Text: 4/3\n"
             "Answer C Text: 3/8\nAnswer D Text: 7/8"),
    "correct_option": "A",
}
#: A whole dialogue: the tutor asks, the student answers twice (labelled as the corpus labels them).
DIALOGUE: dict[str, Any] = {
    "id": "docs-example-1",
    "question": QUESTION,
    "kcs": ["Equivalent Fractions"],
    "turns": [
        {"role": "tutor", "content": "Hi! Which answer did you pick, and why?"},
        {"role": "student", "content": "I picked B because it has the same numbers.", "act": "Math Answer",
         "correctness": "incorrect"},
        {"role": "tutor", "content": "Good try. What do you get if you multiply the top and the bottom of 3/4 by 2?"},
        {"role": "student", "content": "6/8, so it is A.", "act": "Math Answer", "correctness": "correct"},
    ],
}
#: The same dialogue up to the tutor turn the student answers next (what /simulate continues).
HISTORY: dict[str, Any] = {**DIALOGUE, "turns": DIALOGUE["turns"][:3]}


def _example(summary: str, value: Any, description: str | None = None) -> Example:
    return Example(summary=summary, description=description, value=value)


SIMULATE_REQUESTS = [
    _example("The next student turn, greedy", {
        "model": DEMO_SIMULATOR, "dialogues": [HISTORY], "sampling": {"temperature": 0.0, "max_tokens": 40},
    }, "The dialogue ends with the tutor's question; the simulator answers as the student."),
    _example("Two sampled candidates, seeded", {
        "model": DEMO_SIMULATOR, "dialogues": [HISTORY],
        "sampling": {"temperature": 0.8, "top_p": 0.95, "max_tokens": 40, "n": 2, "seed": 7},
    }, "The same seed gives the same candidates again."),
]

SCORE_REQUESTS = [
    _example("Score a simulated turn in place of the real one", {
        "items": [{"dialogue": DIALOGUE, "turn_index": 3, "candidate": "It is 6/8 because I doubled both numbers."}],
        "metrics": list(DEMO_METRICS),
    }, "turn_index 3 is the real student turn \"6/8, so it is A.\"; the candidate is scored against it."),
]

#: The reward example's completion, and the prompt a trainer put before it (OpenRLHF's query is both).
REWARD_PROMPT = "[the student prompt of the dialogue up to turn 3]\n"
REWARD_COMPLETION = "It is 6/8 because I doubled both numbers."

REWARD_REQUESTS = [
    _example("The reward of a completion in place of the real turn", {
        "query": [REWARD_PROMPT + REWARD_COMPLETION], "prompts": [REWARD_PROMPT],
        "labels": [{"dialogue": DIALOGUE, "turn_index": 3}], "metrics": list(DEMO_METRICS),
    }, "OpenRLHF sends query (prompt and completion) and prompts; labels name the real turn (an object, or its "
       "JSON text). The reward is the mean of ROUGE-L and cosine against \"6/8, so it is A.\"."),
    _example("Weighted, with the real turn's text alone", {
        "query": [REWARD_COMPLETION], "labels": [{"real": "6/8, so it is A."}], "metrics": list(DEMO_METRICS),
        "weights": {"rouge_l": 1.0, "cosine": 3.0},
    }, "Without prompts the query is the completion; a real label serves metrics that read no dialogue."),
]

CHAT_REQUESTS = [
    _example("The next student turn, OpenAI chat format", {
        "model": DEMO_SIMULATOR,
        "messages": [
            {"role": "system", "content": QUESTION["text"]},
            {"role": "user", "content": "Hi! Which answer did you pick, and why?"},
            {"role": "assistant", "content": "I picked B because it has the same numbers."},
            {"role": "user", "content": "Good try. What do you get if you multiply the top and the bottom of 3/4 by 2?"},
        ],
        "max_tokens": 40,
    }, "system = the question, user = the tutor, assistant = the student, who speaks next."),
]


#: Request examples by operation id.
REQUESTS: Mapping[str, list[Example]] = {
    "simulate": SIMULATE_REQUESTS, "score": SCORE_REQUESTS, "reward": REWARD_REQUESTS,
    "createChatCompletion": CHAT_REQUESTS,
}

#: What the service answers to the first request example of each operation. The score is the demo's
#: (ROUGE-L, and cosine on the packaged MiniLM: the numbers a test checks against the app); a
#: simulator's text depends on its model, so the texts are a demo student's kind of answer.
RESPONSES: Mapping[str, list[Example]] = {
    "simulate": [_example("One greedy candidate", {
        "model": DEMO_SIMULATOR,
        "results": [{"candidates": [{"text": "I get 6/8, so is it A?", "finish_reason": "stop",
                                     "end_of_dialogue": False}], "end_of_dialogue": False}],
        "usage": {"prompt_tokens": 178, "completion_tokens": 11},
    })],
    "score": [_example("ROUGE-L and cosine of the candidate against the real turn", {
        "metrics": ["rouge_l", "cosine"],
        "items": [{"scores": {"rouge_l": 0.26666666666666666, "cosine": 0.7696415781974792}}],
        "summary": {"rouge_l": {"mean": 0.26666666666666666, "std": 0.0, "count": 1},
                    "cosine": {"mean": 0.7696415781974792, "std": 0.0, "count": 1}},
    })],
    "reward": [_example("The completion's reward and its metrics", {
        "rewards": [0.5181541224320729], "scores": [0.5181541224320729],
        "extra_logs": {"rouge_l": [0.26666666666666666], "cosine": [0.7696415781974792]},
    })],
    "createChatCompletion": [_example("The student's next turn", {
        "id": "chatcmpl-3f2a9c", "object": "chat.completion", "created": 1796428800, "model": DEMO_SIMULATOR,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "I get 6/8, so is it A?"},
                     "finish_reason": "stop", "logprobs": None, "end_of_dialogue": False}],
        "usage": {"prompt_tokens": 178, "completion_tokens": 11, "total_tokens": 189},
    })],
}


@dataclass(frozen=True)
class ErrorExample:
    """A documented error: its status, what provokes it, and the body the service answers."""

    status: int
    summary: str
    type: str
    message: str
    field: str | None = None

    @property
    def body(self) -> dict[str, Any]:
        return {"error": {"type": self.type, "message": self.message, "field": self.field}}

    def as_example(self) -> Example:
        return Example(summary=self.summary, value=self.body)


#: A first start of the demo: the student's adapter is being trained (the second of six builds).
_BUILDING = "building demo:student-sft, step 2 of 6, 12/40 training steps, about 95 s left"


def _common() -> list[ErrorExample]:
    """Errors every POST operation answers the same way."""
    return [
        ErrorExample(401, "No API key (a service started with SIMHUB_API_KEY)", "unauthorized",
                     "missing or wrong API key (Authorization: Bearer or X-API-Key)"),
        ErrorExample(413, "A body over the configured limit", "body_too_large",
                     "request body is larger than the limit of 2000000 bytes"),
        ErrorExample(429, "Over the configured requests per minute", "rate_limited",
                     "rate limit exceeded; retry after the Retry-After seconds"),
        ErrorExample(504, "The work took longer than the request timeout", "timeout",
                     "the request took longer than 120.0 s"),
    ]


def _unknown_simulator(name: str) -> ErrorExample:
    return ErrorExample(404, "A simulator the profile does not have", "unknown_model",
                        f"model: unknown simulator '{name}'; available: {DEMO_SIMULATOR}, tiny-student-base, "
                        "baseline:zero-shot, baseline:ocean, baseline:icl, baseline:reasoning, baseline:oracle", "model")


#: What /simulate and /v1/chat/completions answer for a simulator that cannot run on this server: the
#: demo's prompted baselines are OpenAI models, and no key is set for them (they are listed as
#: unavailable in /models, /v1/models and /ready, with the same reason).
_UNAVAILABLE = ErrorExample(
    503, "A simulator whose endpoint has no API key set on the server (the demo's baseline:zero-shot)",
    "unavailable", "model: baseline:zero-shot is unavailable on this server (no API key for api.openai.com: set "
    "SIMHUB_BASELINE_API_KEY or OPENAI_API_KEY)", "model")

#: What /simulate and /v1/chat/completions answer while their simulator cannot serve.
_SIMULATOR_NOT_SERVING = (
    ErrorExample(503, "The simulator is still being built (a first start)", "not_ready",
                 f"model: simulator {DEMO_SIMULATOR} is not ready yet; waits for demo:student-sft ({_BUILDING})",
                 "model"),
    ErrorExample(503, "The simulator failed to load", "load_failed",
                 f"model: {DEMO_SIMULATOR} failed to load; see /ready", "model"),
    ErrorExample(503, "The simulation queue is full", "overloaded",
                 "simulation queue is full (32 dialogues in flight)"),
)


SIMULATE_ERRORS = [
    ErrorExample(400, "The history ends with a student turn", "invalid_request",
                 "dialogues[0].turns: the last turn is a student turn; send the history up to the tutor turn the "
                 "student answers", "dialogues[0].turns"),
    ErrorExample(400, "More candidates than the configured cap", "cap_exceeded",
                 "sampling.n: 9 candidates, more than the cap of 8", "sampling.n"),
    _unknown_simulator("my-student"),
    ErrorExample(422, "A value of the wrong type", "validation_error",
                 "sampling.temperature: Expected `float`, got `str`", "sampling.temperature"),
    _UNAVAILABLE,
    *_SIMULATOR_NOT_SERVING,
    *_common(),
]

SCORE_ERRORS = [
    ErrorExample(400, "A metric name that does not exist", "invalid_request",
                 "metrics: unknown metric 'rouge' (did you mean 'rouge_l'?); known: acts, correctness, errors, "
                 "knowledge, cosine, rouge_l, tutor_response", "metrics"),
    ErrorExample(422, "A value of the wrong type", "validation_error",
                 "items[0].turn_index: Expected `int`, got `str`", "items[0].turn_index"),
    ErrorExample(503, "A metric model still loading", "not_ready", "metrics: metric cosine is not ready yet (loading)",
                 "metrics"),
    ErrorExample(503, "A metric model failed to load", "load_failed", "metrics: cosine failed to load; see /ready",
                 "metrics"),
    ErrorExample(503, "The scoring queue is full", "overloaded", "scoring queue is full (64 items waiting)"),
    *_common(),
]

REWARD_ERRORS = [
    ErrorExample(400, "A label for a tutor turn", "invalid_request",
                 "labels[0].turn_index: turn 2 of dialogue 'docs-example-1' is a tutor turn, not a student turn",
                 "labels[0].turn_index"),
    ErrorExample(422, "A value of the wrong type", "validation_error",
                 "query: Expected `array`, got `str`", "query"),
    ErrorExample(503, "A metric model still loading", "not_ready", "metrics: metric cosine is not ready yet (loading)",
                 "metrics"),
    ErrorExample(503, "A metric model failed to load", "load_failed", "metrics: cosine failed to load; see /ready",
                 "metrics"),
    ErrorExample(503, "The scoring queue is full", "overloaded", "scoring queue is full (64 items waiting)"),
    *_common(),
]

CHAT_ERRORS = [
    ErrorExample(400, "An OpenAI parameter a simulated student cannot honour", "unsupported_parameter",
                 "tools: not supported by a simulated student (it answers in plain text with the model's own "
                 "distribution); leave them out", "tools"),
    _unknown_simulator("gpt-4o"),
    ErrorExample(422, "A value out of range", "validation_error",
                 "temperature: Expected `float` <= 2.0", "temperature"),
    ErrorExample(502, "The simulator's own endpoint failed", "upstream_error",
                 "model: the simulator's endpoint failed (connection refused at http://127.0.0.1:8001/v1)", "model"),
    _UNAVAILABLE,
    *_SIMULATOR_NOT_SERVING,
    *_common(),
]

#: Documented errors by operation id.
ERRORS: Mapping[str, list[ErrorExample]] = {
    "simulate": SIMULATE_ERRORS, "score": SCORE_ERRORS, "reward": REWARD_ERRORS, "createChatCompletion": CHAT_ERRORS,
}

#: What each status means, for the docs (one description per status; the examples say the rest).
STATUS_DESCRIPTIONS = {
    400: "invalid request, unsupported parameter, limit exceeded, body not UTF-8 or nested too deeply",
    401: "missing or wrong API key (only when the service has one)", 404: "no simulator of that id",
    413: "body too large", 422: "wrong types or constraint violated", 429: "rate limited",
    502: "a simulator's own endpoint failed",
    503: "not ready yet (Retry-After), failed to load (see /ready), unavailable on this server (an endpoint "
         "whose API key is not set: the message names the variable), or queue full (Retry-After)",
    504: "request timed out",
}

def _component(kind: str, id_: str, status: str, *waits_for: str) -> dict[str, Any]:
    return {"kind": kind, "id": id_, "status": status, "waits_for": list(waits_for)}


#: /ready on a first start of the demo (503): what needs no build is served, the student's adapter is
#: being trained, the judge and the other metric models wait for theirs.
READY_EXAMPLE = Example(summary="A first start of the demo, second of six builds", value={
    "ready": False, "status": "loading",
    "step": {"k": 2, "n": 6, "what": "demo:student-sft", "done": 12, "total": 40, "eta_s": 95.0},
    "building": "demo:student-sft", "built": ["tiny:llama"],
    "loading": [DEMO_SIMULATOR, "knowledge", "tutor_response", "judge", "acts"],
    "components": [
        _component("metric", "rouge_l", "ready"), _component("metric", "cosine", "ready"),
        _component("simulator", "tiny-student-base", "ready"),
        _component("simulator", DEMO_SIMULATOR, "building", "demo:student-sft"),
        _component("metric", "knowledge", "waiting", "demo:kt"),
        _component("metric", "tutor_response", "waiting", "demo:tutor"),
        _component("metric", "judge", "waiting", "demo:judge"), _component("metric", "acts", "waiting", "demo:acts"),
    ],
})
