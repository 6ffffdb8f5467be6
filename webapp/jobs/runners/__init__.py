"""What each job kind does, given a claimed job: one module per kind (or family), each ``run_*(ctx)`` function
named by its entry in ``webapp.jobs.kinds`` (see ``base.JobContext``)."""
