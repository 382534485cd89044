"""The shared-conversation routes under /aotx/v1/shared (seed 000, DESIGN §5).

Wire it with `attach_shared(app, runtime, principals)`.
"""

from .attach import attach_shared, replace_principals
from .auth import Principal, principals_from_gateway_config, token_sha256
from .routes import BASE_PATH, make_blueprint

__all__ = ["BASE_PATH", "Principal", "attach_shared", "make_blueprint", "principals_from_gateway_config",
           "replace_principals", "token_sha256"]
