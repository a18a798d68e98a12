"""The real stack of infra/docker-compose.yml, built and run here: collector-contrib and Apache Kafka."""
