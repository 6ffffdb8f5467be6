from django.urls import path

from webapp.datasets import views

urlpatterns = [
    path("datasets/", views.dataset_list, name="dataset_list"),
    path("datasets/new/", views.dataset_new, name="dataset_new"),
    path("datasets/<int:pk>/", views.dataset_detail, name="dataset_detail"),
    path("datasets/<int:pk>/build/", views.dataset_build, name="dataset_build"),
    path("snapshots/<int:pk>/", views.snapshot_detail, name="snapshot_detail"),
    path("snapshots/<int:pk>/export/", views.snapshot_export, name="snapshot_export"),
    path("snapshots/<int:pk>/train/", views.snapshot_train, name="snapshot_train"),
    path("snapshots/<int:pk>/evaluate/", views.snapshot_evaluate, name="snapshot_evaluate"),
    path("exports/<int:pk>/download/", views.export_download, name="export_download"),
    path("checkpoints/compare/", views.checkpoint_compare, name="checkpoint_compare"),
    path("checkpoints/<int:pk>/", views.checkpoint_detail, name="checkpoint_detail"),
]
