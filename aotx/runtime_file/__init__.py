"""The runtime file (profiles, canonical JSON) and the deployment grant file. No credentials in either.

Both formats are described in file.py and grants.py.
"""

from .canonical import canonical_bytes
from .errors import GrantsError, RuntimeFileError
from .file import (FORMAT, FORMAT_VERSION, KNOWN_PROFILES, SHARED_PROFILE, SHARED_PROFILE_VERSION, RuntimeFile,
                   pack_shared, read_runtime_file)
from .grants import (DEFAULT_MAX_AGE_S, GRANTS_FILE, GRANTS_FORMAT, GrantFile, load_grants, make_grants,
                     write_grants)

__all__ = [
    "DEFAULT_MAX_AGE_S", "FORMAT", "FORMAT_VERSION", "GRANTS_FILE", "GRANTS_FORMAT", "GrantFile", "GrantsError",
    "KNOWN_PROFILES", "RuntimeFile", "RuntimeFileError", "SHARED_PROFILE", "SHARED_PROFILE_VERSION",
    "canonical_bytes", "load_grants", "make_grants", "pack_shared", "read_runtime_file", "write_grants",
]
