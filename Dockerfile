# The portal image: web (gunicorn), worker and beat run from it with different commands.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app

RUN useradd --system --uid 10001 --home-dir /app portal

COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt

COPY . .
# collectstatic needs settings but no secrets: a throwaway key for this build step only.
RUN DJANGO_DEBUG=false DJANGO_SECRET_KEY=collectstatic-only DJANGO_ALLOWED_HOSTS=localhost \
    python manage.py collectstatic --noinput

USER portal
EXPOSE 8000
CMD ["gunicorn", "portal.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--threads", "4", "--access-logfile", "-"]
