"""The API's one body parser: JSON, with hostile nesting refused as bad input."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class StrictJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        # Python's decoder recurses once per nesting level: a body of a thousand '[' runs out
        # of stack (RecursionError), which is the client's mistake, not a server error.
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply.") from None
