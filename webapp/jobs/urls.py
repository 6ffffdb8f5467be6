from django.urls import path

from webapp.jobs import views

urlpatterns = [
    path("jobs/", views.job_list, name="job_list"),
    path("jobs/new/<slug:kind>/", views.job_launch, name="job_launch"),
    path("jobs/<int:pk>/", views.job_detail, name="job_detail"),
    path("jobs/<int:pk>/cancel/", views.job_cancel, name="job_cancel"),
    path("jobs/<int:pk>/retry/", views.job_retry, name="job_retry"),
    path("jobs/<int:pk>/log/", views.job_log, name="job_log"),
    path("jobs/<int:pk>/export/", views.job_export_file, name="job_export_file"),
    path("checkpoints/", views.checkpoint_list, name="checkpoint_list"),
]
