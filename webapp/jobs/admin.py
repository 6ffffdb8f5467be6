from django.contrib import admin

from webapp.jobs.models import Checkpoint, Job, StepCritique


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("id", "kind", "status", "progress_done", "progress_total", "worker", "attempts", "created_at")
    list_filter = ("kind", "status")
    raw_id_fields = ("parent", "checkpoint", "created_by")


@admin.register(Checkpoint)
class CheckpointAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "base_model", "parent", "produced_by", "size_bytes", "created_at")
    raw_id_fields = ("parent", "produced_by", "ema_of")


@admin.register(StepCritique)
class StepCritiqueAdmin(admin.ModelAdmin):
    list_display = ("id", "trajectory", "step_index", "verdict", "parse_ok", "job")
    list_filter = ("verdict", "parse_ok")
    raw_id_fields = ("trajectory", "job", "checkpoint")
    show_full_result_count = False
