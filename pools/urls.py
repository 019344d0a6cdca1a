from django.urls import path

from pools import views

urlpatterns = [
    path("", views.home, name="home"),
]
