"""The reader's pages: campaigns, the play page and its htmx endpoints, one
module per page.

Every view that takes an id loads it through `storyapp.access` (the
reader's place in the campaign: game master, player, watcher or none); the
async stream applies the same membership filter in its own query.
"""
