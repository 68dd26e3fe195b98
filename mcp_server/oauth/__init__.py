"""The site as the OAuth 2.1 authorization server of its own MCP endpoints (the ``oauth`` extra).

Built on django-oauth-toolkit (DOT). Opt in by adding ``"oauth2_provider"`` and ``"mcp_server.oauth"`` to
``INSTALLED_APPS`` and ``path("", include("mcp_server.oauth.urls"))`` to the site's URLs; the app config
fills DOT's ``OAUTH2_PROVIDER`` settings with safe choices (:mod:`mcp_server.oauth.defaults`) and
``mcp_server.oauth.authentication.OAuthTokenAuthentication`` validates its tokens at the MCP endpoints.
Nothing here is imported by ``import mcp_server``.
"""
