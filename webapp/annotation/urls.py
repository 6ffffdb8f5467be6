from django.urls import path

from webapp.annotation import views

urlpatterns = [
    path("trajectories/<int:pk>/steps/<int:step_index>/", views.annotate_step, name="annotate_step"),
    path("trajectories/<int:pk>/steps/<int:step_index>/save/", views.save_revision, name="save_revision"),
    path("trajectories/<int:pk>/steps/<int:step_index>/draft/", views.keep_draft, name="keep_draft"),
    path("annotations/<int:pk>/", views.history, name="annotation_history"),
    path("annotations/<int:pk>/delete/", views.delete_annotation, name="delete_annotation"),
    path("annotations/<int:pk>/review/", views.review_annotation, name="review_annotation"),
    path("revisions/<int:pk>/restore/", views.restore_revision, name="restore_revision"),
    path("annotate/undo/", views.undo_last, name="undo_last"),
    path("queues/", views.queue_list, name="queue_list"),
    path("queues/new/", views.queue_new, name="queue_new"),
    path("queues/<int:pk>/", views.queue_detail, name="queue_detail"),
    path("queues/<int:pk>/next/", views.queue_next, name="queue_next"),
    path("review/", views.review_list, name="review_list"),
    path("audit/", views.audit_log, name="audit_log"),
    path("projects/<slug:slug>/notes/", views.import_notes, name="import_notes"),
]
