"""The store's side of the claim registrar (`registrar`): the ownership records are
written by that function, never by the application's role.

`RegistrarClaims` offers the operations the store uses of `claims.ClaimWriter`
(``put_all``, ``undo``, ``mark_releasing``, ``release``, ``hold_again``), each one request to
the registrar (a synchronous ``lambda:Invoke``; AWS Lambda API Reference, "Invoke",
``RequestResponse``), so the store's flows stay as they are. Two differ, because the registrar
acts only on what the session item shows (its module docstring):

* ``mark_releasing`` marks nothing: it asks which ids the incarnation holds (``owned``). The
  store closes or stops those, removes them from its item, then ``release`` — which the
  registrar applies only to ids the item no longer names. ``hold_again`` has nothing to undo.
* ``create`` and ``create_grant`` write the item first and claim after (the registrar requires
  the incarnation to be the key's live one), so they are not one transaction: a refused claim
  makes ``create`` delete the item it wrote (``ResourceOwnedError``, as before).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from ..core.ownership import owner_key_of_token
from .claims import Claimed, ClaimRequest, Holder
from .errors import ResourceOwnedError, gone

#: A transport: sends one request (the registrar's event) and returns its answer.
Invoke = Callable[[Mapping[str, Any]], Mapping[str, Any]]


def lambda_invoke(lambda_client: Any, function_name: str) -> Invoke:
    """The transport of a deployed registrar: ``Invoke`` (``RequestResponse``) of
    ``function_name``.

    Raises (when called):
        RuntimeError: the function failed (its ``FunctionError``), naming the function.
    """

    def invoke(request: Mapping[str, Any]) -> Mapping[str, Any]:
        answer = lambda_client.invoke(
            FunctionName=function_name,
            InvocationType="RequestResponse",
            Payload=json.dumps(request).encode("utf-8"),
        )
        body = answer["Payload"].read()
        if answer.get("FunctionError"):
            raise RuntimeError(
                f"claim registrar {function_name!r} failed ({answer['FunctionError']}): "
                f"{body.decode('utf-8', 'replace')[:500]}"
            )
        result = json.loads(body)
        if not isinstance(result, Mapping):
            raise RuntimeError(f"claim registrar {function_name!r} answered {result!r}")
        return result

    return invoke


class RegistrarClaims:
    """The ownership records of one store, through the registrar (module docstring).

    Args:
        invoke: the transport (`lambda_invoke`, or the registrar's ``handle`` in-process
            in a test).
        sleep: kept for the store's retry waits (the registrar waits for a ``releasing`` claim
            itself).
    """

    def __init__(self, invoke: Invoke, *, sleep: Callable[[float], None]) -> None:
        self._invoke = invoke
        self.sleep = sleep

    # --- claiming ----------------------------------------------------------------------------
    def put(self, request: ClaimRequest) -> Claimed:
        """Claim one id (see `put_all`)."""
        return self.put_all([request])[0]

    def put_all(self, requests: Sequence[ClaimRequest], *, grant: bool = False) -> list[Claimed]:
        """Claim every id for their holder, all or none (``grant``: a new KMS grant, fresh only).

        Raises:
            ResourceOwnedError: another session owns one of them; nothing was written.
            SessionGoneError: the holder is not its key's live incarnation (nothing written).
            RuntimeError: the registrar failed.
        """
        if not requests:
            return []
        holder = requests[0].holder
        answer = self._ask("claim", holder, requests, grant=grant)
        if not answer.get("ok"):
            raise self._error(answer, holder)
        when = {(c["kind"], c["id"]): Decimal(str(c["claimedAt"])) for c in answer["claimed"]}
        return [Claimed(r, when[(r.kind, r.resource_id)], None) for r in requests]

    def undo(self, claimed: Claimed) -> None:
        """Take back a claim whose write did not happen (best effort)."""
        self.undo_all([claimed])

    def undo_all(self, claimed: Sequence[Claimed]) -> None:
        """Take back claims whose write did not happen (best effort: the registrar deletes only
        young claims of this incarnation that its item does not name)."""
        if claimed:
            self._ask("undo", claimed[0].request.holder, [c.request for c in claimed])

    # --- earlier ids the store closes or stops itself -------------------------------------------
    def mark_releasing(self, requests: Sequence[ClaimRequest]) -> list[ClaimRequest]:
        """The requests whose ids the holder holds now (nothing is marked: module docstring)."""
        if not requests:
            return []
        answer = self._ask("owned", requests[0].holder, requests)
        owned = {(kind, rid) for kind, rid in answer.get("owned") or []}
        return [r for r in requests if (r.kind, r.resource_id) in owned]

    def release(self, requests: Sequence[ClaimRequest]) -> None:
        """Mark released the claims of ids the holder closed or stopped and no longer names."""
        if requests:
            self._ask("release", requests[0].holder, requests)

    def hold_again(self, requests: Sequence[ClaimRequest]) -> None:
        """Nothing to do: the registrar never marked them."""

    # --- the call ------------------------------------------------------------------------------
    def _ask(
        self, op: str, holder: Holder, requests: Sequence[ClaimRequest], *, grant: bool = False
    ) -> Mapping[str, Any]:
        key = owner_key_of_token(holder.owner)
        if key is None:
            raise ValueError(f"owner {holder.owner!r}: not an owner token of a session key")
        request = {
            "op": op,
            "key": key,
            "incarnation": holder.incarnation,
            "resources": [[r.kind, r.resource_id] for r in requests],
            "grant": grant,
        }
        if holder.token is not None:
            request["token"] = holder.token
        return self._invoke(request)

    @staticmethod
    def _error(answer: Mapping[str, Any], holder: Holder) -> Exception:
        code, message = answer.get("error"), str(answer.get("message", ""))
        if code == "ResourceOwned":
            owner_key = answer.get("ownerKey")
            return ResourceOwnedError(
                message,
                session_id=holder.session_id,
                partition=holder.partition,
                kind=str(answer.get("kind")),
                resource_id=str(answer.get("id")),
                owner_key=dict(owner_key) if isinstance(owner_key, Mapping) else None,
                owner_incarnation=answer.get("ownerIncarnation"),
                releasing=bool(answer.get("releasing")),
            )
        if code == "SessionNotLive":
            return gone(holder.session_id, holder.partition)
        return RuntimeError(f"claim registrar: {code}: {message}")
