"""The card vault: AES-256-GCM, keys rotated by id, keyed fingerprints.

The implementation lives in :mod:`treasury_vault.aesgcm` (it needs ``cryptography``); this
package imports nothing so that registering the plugin (:mod:`treasury_vault.plugin`) stays cheap.
"""
