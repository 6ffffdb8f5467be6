from django.contrib import admin

from webapp.trajectories.models import ImportBatch, Message, Project, Task, Trajectory


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ("name", "domain", "n_trajectories", "n_tasks", "mean_reward")
    prepopulated_fields = {"slug": ("name",)}


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ("external_id", "project", "split")
    list_filter = ("project",)
    search_fields = ("external_id",)


@admin.register(Trajectory)
class TrajectoryAdmin(admin.ModelAdmin):
    list_display = ("id", "project", "task", "trial", "source_model", "reward", "termination_reason", "n_messages")
    list_filter = ("project", "success", "termination_reason")
    raw_id_fields = ("task", "import_batch")
    show_full_result_count = False


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ("id", "trajectory", "position", "role", "step_index")
    raw_id_fields = ("trajectory",)
    show_full_result_count = False


@admin.register(ImportBatch)
class ImportBatchAdmin(admin.ModelAdmin):
    list_display = ("file_name", "project", "format", "status", "n_added", "n_skipped", "created_at")
    list_filter = ("status", "format")
