from django.urls import path

from webapp.trajectories import views

urlpatterns = [
    path("", views.home, name="home"),
    path("trajectories/", views.trajectory_list, name="trajectory_list"),
    path("trajectories/<int:pk>/", views.trajectory_detail, name="trajectory_detail"),
    path("projects/<slug:slug>/", views.project_detail, name="project_detail"),
    path("import/", views.import_upload, name="import_upload"),
]
