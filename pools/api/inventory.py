"""The inventory over the API: ask for a full sync now."""

from __future__ import annotations

from drf_spectacular.utils import (
    extend_schema,
)
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pools import tasks
from pools.api.base import BaseView, QueuedSerializer, error_responses
from pools.common.roles import Capability


class InventorySyncView(BaseView, APIView):
    capabilities = {"POST": Capability.REQUEST_MOVE}

    @extend_schema(
        request=None,
        responses={202: QueuedSerializer, **error_responses(401, 403, 429)},
        description=(
            "Queue a full inventory sync now (it also runs every INVENTORY_SYNC_SECONDS; with "
            "a watcher running, the watcher lists everything again)."
        ),
    )
    def post(self, request: Request) -> Response:
        tasks.queue_inventory_sync()
        return Response({"queued": True}, status=status.HTTP_202_ACCEPTED)
