from django.urls import path

from pools.pages import (
    audit,
    bookings,
    clusters,
    drills,
    exports,
    fit,
    fleet,
    insights,
    maintenance,
    moves,
    reclaim,
    search,
    tokens,
)

urlpatterns = [
    path("", fleet.home, name="home"),
    path("pools/", fleet.pool_list, name="pool-list"),
    path("fleet/", clusters.fleet, name="fleet"),
    path("pool-colours.css", fleet.pool_colours, name="pool-colours"),
    path("pools/new/", fleet.pool_create, name="pool-create"),
    path("pools/<str:name>/", fleet.pool_detail, name="pool-detail"),
    path("pools/<str:name>/insights/", insights.pool_insights, name="pool-insights"),
    path("pools/<str:name>/drills/", drills.pool_drills, name="pool-drills"),
    path("pools/<str:name>/calendar/", bookings.pool_calendar_page, name="pool-calendar"),
    path("pools/<str:name>/reclaim/", reclaim.pool_reclaim, name="pool-reclaim"),
    path("insights/idle/", reclaim.teams_idle, name="teams-idle"),
    path("reclaims/<int:pk>/", reclaim.reclaim_detail, name="reclaim-detail"),
    *[
        path(
            f"reclaims/<int:pk>/{step}/",
            reclaim.reclaim_step,
            {"step": step},
            name=f"reclaim-{step}",
        )
        for step in ("request", "approve", "reject")
    ],
    path("pools/<str:name>/calendar.ics", bookings.pool_calendar_ics, name="pool-calendar-ics"),
    path("pools/<str:name>/maintenance/new/", maintenance.maintenance_new, name="maintenance-new"),
    path("pools/<str:name>/edit/", fleet.pool_edit, name="pool-edit"),
    path("pools/<str:name>/retire/", fleet.pool_retire, name="pool-retire"),
    path("pools/<str:name>/restore/", fleet.pool_restore, name="pool-restore"),
    path("nodes/<str:name>/", fleet.node_detail, name="node-detail"),
    path("nodes/<str:name>/reconfigure/", fleet.node_reconfigure, name="node-reconfigure"),
    path("moves/", moves.move_list, name="move-list"),
    path("moves/bulk/", moves.move_bulk, name="move-bulk"),
    path("moves/new/", moves.move_new, name="move-new"),
    path("moves/<int:pk>/", moves.move_detail, name="move-detail"),
    path("moves/<int:pk>/approve/", moves.move_approve, name="move-approve"),
    path("moves/<int:pk>/reject/", moves.move_reject, name="move-reject"),
    path("moves/<int:pk>/cancel/", moves.move_cancel, name="move-cancel"),
    path("loans/", moves.loans, name="loans"),
    path("bookings/", bookings.booking_list, name="booking-list"),
    path("bookings/new/", bookings.booking_new, name="booking-new"),
    path("bookings/<int:pk>/", bookings.booking_detail, name="booking-detail"),
    *(
        path(
            f"bookings/<int:pk>/{step}/",
            bookings.booking_decide,
            {"step": step},
            name=f"booking-{step}",
        )
        for step in ("approve", "reject", "cancel")
    ),
    path("maintenance/", maintenance.maintenance_list, name="maintenance-list"),
    path("maintenance/<int:pk>/", maintenance.maintenance_detail, name="maintenance-detail"),
    *(
        path(
            f"maintenance/<int:pk>/{step}/",
            maintenance.maintenance_steer,
            {"step": step},
            name=f"maintenance-{step}",
        )
        for step in ("confirm", "pause", "resume", "cancel")
    ),
    path("insights/profiles/", insights.profiles, name="profiles"),
    path("advice/", insights.advice_list, name="advice"),
    path("advice/dismiss/", insights.advice_dismiss, name="advice-dismiss"),
    path("loans/<int:pk>/change/", moves.loan_change, name="loan-change"),
    path("fit/", fit.fit_check, name="fit-check"),
    path("pending/", fit.pending, name="pending"),
    path("audit/", audit.audit_log, name="audit-log"),
    path("export/nodes.csv", exports.nodes_csv, name="export-nodes"),
    path("export/moves.csv", exports.moves_csv, name="export-moves"),
    path("export/audit.csv", exports.audit_csv, name="export-audit"),
    path("search/", search.search_page, name="search"),
    path("tokens/", tokens.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", tokens.token_revoke_view, name="token-revoke"),
]
