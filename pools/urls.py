from django.urls import path

from pools import views

urlpatterns = [
    path("", views.home, name="home"),
    path("pools/new/", views.pool_create, name="pool-create"),
    path("pools/<str:name>/", views.pool_detail, name="pool-detail"),
    path("pools/<str:name>/edit/", views.pool_edit, name="pool-edit"),
    path("pools/<str:name>/retire/", views.pool_retire, name="pool-retire"),
    path("nodes/<str:name>/", views.node_detail, name="node-detail"),
]
