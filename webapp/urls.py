from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from webapp.api.api import urls as api_urls

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(template_name="accounts/login.html"), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", api_urls()),
    path("", include("webapp.api.urls")),
    path("", include("webapp.datasets.urls")),
    path("", include("webapp.jobs.urls")),
    path("", include("webapp.annotation.urls")),
    path("", include("webapp.trajectories.urls")),
]
