from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies = ()  # tuples: Django copies both into lists

    operations = (
        migrations.CreateModel(
            name="Order",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False)),
                ("item", models.CharField(max_length=100)),
                ("shipped", models.BooleanField(default=False)),
            ],
        ),
    )
