"""Take a payment with the Stripe key from the environment's config."""
import json
import os
import sys


def load_config():
    env = os.environ.get("SHOP_ENV", "development")
    with open(f"config/{env}.json") as f:
        config = json.load(f)
    config["stripe_api_key"] = os.environ.get("STRIPE_API_KEY") or config["stripe_api_key"]
    return config


def main():
    config = load_config()
    if not config["stripe_api_key"]:
        sys.exit(f"no Stripe key for {config['env']}: set stripe_api_key in config/{config['env']}.json")
    live = config["stripe_api_key"].startswith("sk_live_")
    print(f"{config['env']}: payments enabled ({'live' if live else 'test'} mode, {config['currency']})")


if __name__ == "__main__":
    main()
