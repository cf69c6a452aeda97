from django.urls import path

from . import views

urlpatterns = [
    path("ops/jobs/", views.job_monitor, name="job_monitor"),
    path("ops/jobs/<int:job_id>/retry/", views.job_retry, name="job_retry"),
    path("ops/jobs/<int:job_id>/cancel/", views.job_cancel, name="job_cancel"),
    path("ops/narrations/<int:action_id>/requeue/", views.narration_requeue, name="narration_requeue"),
    path("ops/narrations/<int:action_id>/fail/", views.narration_fail, name="narration_fail"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
]
