from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from storyapp import members
from storyapp.models import Campaign, Membership


class Command(BaseCommand):
    help = (
        "Share a campaign with an existing reader as a player (with a seat) or a watcher, as its members page "
        "does; a reader already in it gets the role and seat given. --remove takes them out."
    )

    def add_arguments(self, parser):
        parser.add_argument("--campaign", type=int, required=True, help="The campaign's id.")
        parser.add_argument("--user", required=True, help="The reader's username.")
        parser.add_argument("--role", choices=Membership.Role.values, help="player or watcher (not with --remove).")
        parser.add_argument("--seat", default="", help="The player's character name (their seat).")
        parser.add_argument("--seat-description", default="", help="A short description of that character.")
        parser.add_argument("--remove", action="store_true", help="Take the reader out of the campaign.")

    def handle(self, *args, campaign, user, role, seat, seat_description, remove, **options):
        story = Campaign.objects.filter(pk=campaign).first()
        if story is None:
            raise CommandError(f"No campaign with id {campaign}.")
        reader = get_user_model().objects.filter(username=user).first()
        if reader is None:
            raise CommandError(f"No reader is called “{user}”.")
        if not remove and role is None:
            raise CommandError("Give --role player or --role watcher (or --remove).")
        existing = story.memberships.filter(user=reader).first()
        try:
            if remove:
                members.remove(campaign=story, user=reader)
                self.stdout.write(f"{user} is no longer a member of “{story.title}”.")
                return
            if existing is None:
                membership = members.invite(campaign=story, username=user, role=role, seat_name=seat,
                                            seat_description=seat_description)
            else:
                membership = members.change(membership=existing, role=role, seat_name=seat,
                                            seat_description=seat_description)
        except members.MembershipRefused as exc:
            raise CommandError(str(exc)) from exc
        seat_text = f" as {membership.seat_name}" if membership.seat_name else ""
        self.stdout.write(f"{user} is a {membership.role}{seat_text} in “{story.title}” (campaign {story.pk}).")
