# The portal image: web (gunicorn), worker, watcher and beat run from it with different
# commands. It runs as a fixed numeric user (10001, the Helm chart's runAsUser) and works
# with a read-only root filesystem: everything it writes at run time goes to /tmp and
# /dev/shm, which the chart mounts as emptyDirs.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app

RUN groupadd --system --gid 10001 portal \
    && useradd --system --uid 10001 --gid 10001 --home-dir /app --no-create-home \
       --shell /usr/sbin/nologin portal
# compose's simulator profile writes its kubeconfig here, into a named volume: a new
# volume takes this directory's owner, so the portal user can write it.
RUN install -d -o 10001 -g 10001 -m 0755 /kube

COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt

COPY . .
# collectstatic needs settings but no secrets: a throwaway key for this build step only.
# The bytecode is compiled now because the running container cannot write it.
RUN DJANGO_DEBUG=false DJANGO_SECRET_KEY=collectstatic-only DJANGO_ALLOWED_HOSTS=localhost \
    python manage.py collectstatic --noinput \
    && python -m compileall -q /app/portal /app/pools

# Numeric, so that a cluster's runAsNonRoot check can verify it without /etc/passwd.
USER 10001:10001
EXPOSE 8000
CMD ["gunicorn", "portal.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--threads", "4", "--worker-tmp-dir", "/dev/shm", "--no-control-socket", "--access-logfile", "-"]
