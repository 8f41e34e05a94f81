"""What a controller operation produces: records to propose and the response to send after they
commit (`ControllerResult`), and `PendingRecords`, which builds such records one at a time against
a private copy of the image so that each is computed from the state the previous ones leave.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from quorum.controller.messages import BrokerRegistrationResponse, ControllerResponse
from quorum.metadata.errors import Errors
from quorum.metadata.image import ApplyResult, MetadataImage
from quorum.metadata.records import Record, RegisterBroker
from quorum.raft.errors import InvariantViolation


@dataclass(frozen=True, slots=True)
class ControllerResult:
    """Records to propose, in order, and the response to send once they are committed."""

    records: tuple[Record, ...] = ()
    response: ControllerResponse | None = None

    def complete(self, results: Sequence[ApplyResult]) -> ControllerResponse | None:
        """The response after commit, given the ApplyResult of each record (in order). Fills in
        what only the log knows (a broker epoch is its registration's offset); if a record did
        not apply cleanly, the state moved under the controller: NOT_CONTROLLER (retriable)."""
        if len(results) != len(self.records):
            raise ValueError(f"{len(results)} results for {len(self.records)} records")
        response = self.response
        if response is None:
            return None
        if any(r.error is not Errors.NONE for r in results):
            return replace(response, error=Errors.NOT_CONTROLLER)
        if isinstance(response, BrokerRegistrationResponse):
            for record, result in zip(self.records, results, strict=True):
                if isinstance(record, RegisterBroker):
                    return replace(response, broker_epoch=result.offset)
        return response


class PendingRecords:
    """Records being built for one result, applied to a private copy of the image so that each
    change is computed against the state the previous ones leave (offsets there are scratch)."""

    def __init__(self, image: MetadataImage) -> None:
        self._image = image
        self._copied = False
        self.records: list[Record] = []

    @property
    def view(self) -> MetadataImage:
        return self._image

    def add(self, record: Record | None) -> None:
        if record is None:
            return
        if not self._copied:
            self._image = self._image.copy()
            self._copied = True
        view = self._image
        result = view.apply_record(view.applied_offset + 1, view.applied_epoch, record)
        if result.error is not Errors.NONE:
            raise InvariantViolation(f"controller built a record that does not apply: {result}")
        self.records.append(record)

    def result(self, response: ControllerResponse | None) -> ControllerResult:
        return ControllerResult(tuple(self.records), response)
