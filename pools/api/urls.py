from django.urls import path, re_path
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view
from rest_framework.exceptions import NotFound
from rest_framework.routers import SimpleRouter

from pools.api import (
    audit,
    bookings,
    clusters,
    drills,
    fit,
    fleet,
    insights,
    inventory,
    maintenance,
    moves,
    reclaim,
    search,
)

router = SimpleRouter()
router.register("pools", fleet.PoolViewSet, basename="pool")
router.register("nodes", fleet.NodeViewSet, basename="node")
router.register("moves", moves.MoveViewSet, basename="move")
router.register("audit-events", audit.AuditEventViewSet, basename="audit-event")
router.register("drills", drills.DrillViewSet, basename="drill")
router.register("maintenances", maintenance.MaintenanceViewSet, basename="maintenance")
router.register("reclaims", reclaim.ReclaimViewSet, basename="reclaim")
router.register("bookings", bookings.BookingViewSet, basename="booking")


@extend_schema(exclude=True)
@api_view(["GET", "POST", "PUT", "PATCH", "DELETE"])
def unknown(request, rest):  # type: ignore[no-untyped-def]
    raise NotFound(f"No API endpoint at /api/v1/{rest}.")


urlpatterns = [
    path("summary/", fleet.SummaryView.as_view(), name="pool-summary"),
    path("clusters/", clusters.ClustersView.as_view(), name="api-clusters"),
    path("fleet/", clusters.FleetView.as_view(), name="api-fleet"),
    path("search/", search.SearchView.as_view(), name="search"),
    path("fit/", fit.FitView.as_view(), name="fit-api"),
    path("fit/fleet/", fit.FleetFitView.as_view(), name="fit-fleet-api"),
    path("inventory/sync/", inventory.InventorySyncView.as_view(), name="inventory-sync"),
    path("profiles/", insights.ProfilesView.as_view(), name="api-profiles"),
    path("advice/", insights.AdviceView.as_view(), name="api-advice"),
    path("advice/dismiss/", insights.AdviceDismissView.as_view(), name="api-advice-dismiss"),
    path(
        "pools/<str:name>/insights/",
        insights.PoolInsightsView.as_view(),
        name="api-pool-insights",
    ),
    path("pools/<str:name>/reclaim/", reclaim.PoolReclaimView.as_view(), name="api-pool-reclaim"),
    path("teams/idle/", reclaim.TeamsIdleView.as_view(), name="api-teams-idle"),
    path(
        "pools/<str:name>/calendar/",
        bookings.PoolCalendarView.as_view(),
        name="api-pool-calendar",
    ),
    path(
        "pools/<str:name>/headroom/",
        maintenance.PoolHeadroomView.as_view(),
        name="api-pool-headroom",
    ),
    *router.urls,
    re_path(r"^(?P<rest>.*)$", unknown),
]

# The API authenticates by itself (tokens or the session, in pools.api): the pages' login
# redirect must not catch a token client.
for pattern in urlpatterns:
    pattern.callback.login_required = False  # type: ignore[union-attr]
