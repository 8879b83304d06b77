"""Container integration tests (testcontainers + a Docker engine); marked `integration`."""
