from django.core.management.base import BaseCommand
from django.db import transaction

from endpoints import secrets_at_rest
from endpoints.models import EndpointProfile


class Command(BaseCommand):
    help = ("Write every stored endpoint API key again with LOREMASTER_ENCRYPTION_KEY, the last step of "
            "rotating it; keys no configured key reads are listed and left as they are.")

    @transaction.atomic
    def handle(self, *args, **options):
        rewritten, unreadable = 0, []
        for profile in EndpointProfile.objects.select_for_update().exclude(api_key_encrypted=""):
            token = secrets_at_rest.reencrypt(profile.api_key_encrypted)
            if token is None:
                unreadable.append(profile.name)
                continue
            EndpointProfile.objects.filter(pk=profile.pk).update(api_key_encrypted=token)
            rewritten += 1
        self.stdout.write(f"Re-encrypted {rewritten} API key{'s' if rewritten != 1 else ''} with the current key.")
        if unreadable:
            self.stdout.write(f"No configured key reads the API key of: {', '.join(unreadable)}; "
                              "re-enter those in the admin.")
