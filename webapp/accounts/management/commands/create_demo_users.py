from django.core.management.base import BaseCommand

from webapp.accounts.services import do_create_demo_users


class Command(BaseCommand):
    help = "Create one demo user per role (annotator, reviewer, researcher, admin) and print the credentials."

    def handle(self, *args, **options):
        for demo, created in do_create_demo_users():
            state = "created" if created else "exists "
            self.stdout.write(f"  {state}  {demo.role:<10}  user: {demo.username:<10}  password: {demo.password}")
