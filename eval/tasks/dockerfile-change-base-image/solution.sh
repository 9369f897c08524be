sed -i 's/python:3\.9-slim/python:3.12-slim/' Dockerfile
