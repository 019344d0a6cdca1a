"""Single sign-on with OpenID Connect (mozilla-django-oidc as the relying party).

`config` reads the environment, `role_map` decides which portal roles a provider's groups
grant (pure), `accounts` finds or creates the portal user for a provider subject and sets
its roles, `backend` and `views` plug those into the sign-in, callback and sign-out.
"""
