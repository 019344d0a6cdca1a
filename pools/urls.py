from django.urls import path

from pools import export_views, move_views, search_views, token_views, views

urlpatterns = [
    path("", views.home, name="home"),
    path("pools/", views.pool_list, name="pool-list"),
    path("pool-colours.css", views.pool_colours, name="pool-colours"),
    path("pools/new/", views.pool_create, name="pool-create"),
    path("pools/<str:name>/", views.pool_detail, name="pool-detail"),
    path("pools/<str:name>/edit/", views.pool_edit, name="pool-edit"),
    path("pools/<str:name>/retire/", views.pool_retire, name="pool-retire"),
    path("pools/<str:name>/restore/", views.pool_restore, name="pool-restore"),
    path("nodes/<str:name>/", views.node_detail, name="node-detail"),
    path("moves/", move_views.move_list, name="move-list"),
    path("moves/bulk/", move_views.move_bulk, name="move-bulk"),
    path("moves/new/", move_views.move_new, name="move-new"),
    path("moves/<int:pk>/", move_views.move_detail, name="move-detail"),
    path("moves/<int:pk>/approve/", move_views.move_approve, name="move-approve"),
    path("moves/<int:pk>/reject/", move_views.move_reject, name="move-reject"),
    path("moves/<int:pk>/cancel/", move_views.move_cancel, name="move-cancel"),
    path("loans/", move_views.loans, name="loans"),
    path("loans/<int:pk>/change/", move_views.loan_change, name="loan-change"),
    path("audit/", move_views.audit_log, name="audit-log"),
    path("export/nodes.csv", export_views.nodes_csv, name="export-nodes"),
    path("export/moves.csv", export_views.moves_csv, name="export-moves"),
    path("export/audit.csv", export_views.audit_csv, name="export-audit"),
    path("search/", search_views.search_page, name="search"),
    path("tokens/", token_views.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", token_views.token_revoke_view, name="token-revoke"),
]
