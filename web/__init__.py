"""The admin HTTP front door (Starlette): ``web.app:create_app`` builds it."""
