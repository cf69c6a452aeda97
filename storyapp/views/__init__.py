"""The reader's pages: campaigns, the play page and its htmx endpoints, one
module per page.

Every view that takes an id loads it through `access.campaign_for` or
`access.action_for`, which filter by the requesting reader; the async stream
applies the same owner filter in its own query.
"""
