import { Module } from '@nestjs/common';
import { PageViewModule } from '../page-view/page-view.module';
import { ReportJob } from './report.job';
import { ReportService } from './report.service';

@Module({
  imports: [PageViewModule],
  providers: [ReportService, ReportJob],
})
export class ReportModule {}
