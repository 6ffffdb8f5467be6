from django.core.management.base import BaseCommand, CommandError

from webapp.accounts.roles import ALL_ROLES
from webapp.accounts.services import do_create_user


class Command(BaseCommand):
    help = "Create a user with a role, or reset an existing user's password."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=ALL_ROLES)
        parser.add_argument("--password", required=True)

    def handle(self, *args, username, role, password, **options):
        try:
            _, created = do_create_user(username, password, role, reset_password=True)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{'created' if created else 'updated'} {username} ({role})")
