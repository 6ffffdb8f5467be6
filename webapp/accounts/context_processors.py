from webapp.accounts import access
from webapp.accounts.roles import ADMIN, REVIEWER, roles_of


def roles(request):
    user = getattr(request, "user", None)
    return {
        "user_roles": sorted(roles_of(user)) if user else [],
        "user_is_researcher": access.is_researcher(user) if user else False,
        "user_is_reviewer": bool(roles_of(user) & {REVIEWER, ADMIN}) if user else False,
    }
