"""What a model can do, and how much of a request a provider can check without sending it."""

from __future__ import annotations

from allama.types._base import Data
from allama.types._fields import Warning
from allama.types._names import CapabilitySupport, ChatCapability, ValidationCoverage

__all__ = ["CapabilitySupport", "ChatCapability", "ChatValidation", "ValidationCoverage"]


class ChatValidation(Data):
    """The result of validating a request without sending it."""

    coverage: ValidationCoverage
    warnings: tuple[Warning, ...] = ()

    def with_warning(self, warning: Warning) -> ChatValidation:
        return self.model_copy(update={"warnings": (*self.warnings, warning)})
