"""Screening without running: the rule filter over a batch of actions, and its rule table."""

from __future__ import annotations

from anyio import to_thread
from fastapi import APIRouter
from pydantic import BaseModel, Field

from anticheat.rules import RULES
from anticheat.rules.rule import Answer, Fallback
from anticheat.screen import screen
from proctor.models import CheatCategory, Decision, Level, ScreenRequest, ScreenResponse
from service.deps import Authenticated
from service.errors import error_responses

router = APIRouter(prefix="/v1", tags=["anti-cheat"], dependencies=[Authenticated])


class RulePublic(BaseModel):
    id: str
    category: CheatCategory
    decision: str
    description: str
    level: Level = Field(
        description="what a hit makes of the episode: `attempt` (a step penalty, the reward "
        "stays merit) or `cheat` (the policy's cheat reward)"
    )
    answer: Answer | None = Field(
        None, description="what structure answers a hit with; none: it acts on the grade"
    )
    fallback: Fallback | None = Field(
        None,
        description="for a `review`: what it comes to when no judge decides (`run` or "
        "`oracle`), always recorded as an attempt",
    )


def _screen_all(request: ScreenRequest) -> ScreenResponse:
    return ScreenResponse(verdicts=[screen(item.action, item.task) for item in request.items])


@router.post(
    "/screen",
    operation_id="screen",
    response_model=ScreenResponse,
    responses=error_responses(400, 401, 413, 422),
)
async def screen_actions(request: ScreenRequest) -> ScreenResponse:
    """Verdicts in the order of the items; nothing is executed."""
    return await to_thread.run_sync(_screen_all, request)


@router.get(
    "/rules",
    operation_id="list_rules",
    response_model=list[RulePublic],
    responses=error_responses(401),
)
def list_rules() -> list[RulePublic]:
    return [
        RulePublic(
            id=r.id,
            category=r.category,
            decision=str(r.decision),
            description=r.description,
            level=r.level,
            answer=r.answer,
            fallback=r.fallback if r.decision is Decision.review else None,
        )
        for r in RULES
    ]
